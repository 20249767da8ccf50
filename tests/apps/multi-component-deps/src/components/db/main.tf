variable "subnet_ids" { type = string }

output "endpoint" {
  value = "db.internal:5432"
}
