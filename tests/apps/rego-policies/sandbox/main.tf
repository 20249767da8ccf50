variable "vpc_cidr" { type = string }

resource "terraform_data" "vpc" {
  input = var.vpc_cidr
}

output "vpc" {
  value = { cidr = terraform_data.vpc.output }
}
