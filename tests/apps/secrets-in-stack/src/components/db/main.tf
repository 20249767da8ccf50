variable "master_password_secret_arn" { type = string }
variable "license_secret_arn" { type = string }
variable "identifier" { type = string }

resource "terraform_data" "db" {
  input = { id = var.identifier, secret = var.master_password_secret_arn }
}

output "endpoint" {
  value = "${var.identifier}.db.local:5432"
}
