variable "region" { type = string }
variable "vpc_id" { type = string }
variable "subnet_ids" { type = string }
variable "instance_type" { type = string }
variable "hostname" { type = string }
variable "zone_id" { type = string }

resource "terraform_data" "vm" {
  input = { type = var.instance_type, subnets = var.subnet_ids }
}

output "instance_id" {
  value = "i-0123456789abcdef0"
}

output "url" {
  value = "https://${var.hostname}"
}
