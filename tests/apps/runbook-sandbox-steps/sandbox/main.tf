variable "install_id" { type = string }

output "network_id" {
  value = "net-${var.install_id}"
}
