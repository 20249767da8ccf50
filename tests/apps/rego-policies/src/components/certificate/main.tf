variable "domain_name" { type = string }

resource "terraform_data" "certificate" {
  input = var.domain_name
}

output "domain_name" {
  value = terraform_data.certificate.output
}
