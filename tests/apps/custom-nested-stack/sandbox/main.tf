variable "install_id" { type = string }

output "install_id" {
  value = var.install_id
}
