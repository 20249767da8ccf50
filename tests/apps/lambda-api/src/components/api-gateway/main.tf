variable "function_arn" { type = string }
variable "domain_name" { type = string }

resource "terraform_data" "api" {
  input = var.function_arn
}

output "endpoint" {
  value = "https://${var.domain_name}"
}
