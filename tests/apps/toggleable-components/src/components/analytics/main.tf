variable "topic" { type = string }
variable "retention_days" { type = number }

output "dashboard" {
  value = "https://analytics.local/${var.topic}"
}
