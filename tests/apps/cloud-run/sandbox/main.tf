variable "enable_nuon_dns" { type = string }

output "enabled_dns" {
  value = var.enable_nuon_dns == "true"
}
