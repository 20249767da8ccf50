variable "table_name" { type = string }
variable "region" { type = string }

resource "terraform_data" "table" {
  input = "arn:aws:dynamodb:${var.region}:000000000000:table/${var.table_name}"
}

output "dynamodb_table_arn" {
  value = terraform_data.table.output
}
