variable "install_id" { type = string }

output "vpc" {
  value = { id = "vpc-${var.install_id}", cidr = "10.0.0.0/16" }
}
