variable "account_id" { type = string }
variable "zones" { type = string }
variable "zone_count" { type = number }
variable "env_name" { type = string }
variable "metrics_port" { type = number }
variable "log_level" { type = string }

output "summary" {
  value = "${var.env_name} in ${var.account_id}: ${var.zone_count} zones ${var.zones}, metrics on ${var.metrics_port}, ${var.log_level}"
}
