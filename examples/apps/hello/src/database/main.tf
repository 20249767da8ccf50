variable "name" {
  type = string
}

variable "network_id" {
  type = string
}

variable "password" {
  type      = string
  sensitive = true
}

resource "terraform_data" "database" {
  input = {
    name    = var.name
    network = var.network_id
  }
}

output "url" {
  value = "postgres://app@${terraform_data.database.output.name}.${terraform_data.database.output.network}:5432/app"
}

output "port" {
  value = 5432
}

# Sensitive: the API shows it as (sensitive), and a job that renders it
# has it redacted from its log.
output "admin_dsn" {
  value     = "postgres://admin:${var.password}@${terraform_data.database.output.name}:5432/app"
  sensitive = true
}
