variable "version" { type = string }
variable "network_id" { type = string }

output "endpoint" {
  value = "db.${var.network_id}:5432"
}
