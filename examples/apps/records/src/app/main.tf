variable "license_url" {
  type = string
}

variable "license_revision" {
  type = string
}

resource "terraform_data" "app" {
  input = "licensed by ${var.license_url} (revision ${var.license_revision})"
}

output "license" {
  value = terraform_data.app.output
}
