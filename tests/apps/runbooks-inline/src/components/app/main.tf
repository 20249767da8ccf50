variable "install_id" { type = string }

resource "terraform_data" "app" {
  input = var.install_id
}

output "url" {
  value = "https://app.${var.install_id}.nuon.run"
}
