variable "install_id" { type = string }
variable "region" { type = string }
variable "function_name" { type = string }
variable "image_uri" { type = string }
variable "dynamodb_table_arn" { type = string }
variable "api_key" {
  type      = string
  sensitive = true
}

resource "terraform_data" "function" {
  input = {
    name  = var.function_name
    image = var.image_uri
    table = var.dynamodb_table_arn
  }
}

output "function_arn" {
  value = "arn:aws:lambda:${var.region}:000000000000:function:${var.function_name}"
}

output "function_name" {
  value = var.function_name
}
