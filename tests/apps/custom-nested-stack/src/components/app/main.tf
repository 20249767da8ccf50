variable "db_host" { type = string }
variable "db_port" { type = string }

output "dsn" {
  value = "postgres://${var.db_host}:${var.db_port}/postgres"
}
