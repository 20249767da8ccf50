variable "install_id" { type = string }
variable "region" { type = string }
variable "domain_name" { type = string }
variable "zone_id" { type = string }

resource "terraform_data" "certificate" {
  input = "arn:aws:acm:${var.region}:000000000000:certificate/${var.install_id}"
}

output "arn" {
  value = terraform_data.certificate.output
}

output "domain_name" {
  value = var.domain_name
}
