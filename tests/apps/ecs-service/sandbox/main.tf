variable "nuon_id" { type = string }
variable "region" { type = string }
variable "vpc_id" { type = string }

resource "terraform_data" "min" {
  input = "${var.nuon_id}@${var.vpc_id}"
}

output "vpc" {
  value = { id = var.vpc_id }
}
