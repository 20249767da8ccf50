variable "db_host" { type = string }

resource "terraform_data" "app" {
  input = var.db_host
}

output "url" {
  value = "http://app/${terraform_data.app.output}"
}
