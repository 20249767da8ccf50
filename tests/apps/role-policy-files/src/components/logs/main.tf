variable "log_group" { type = string }

output "log_group" {
  value = var.log_group
}
