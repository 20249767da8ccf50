variable "bucket_name" { type = string }
variable "owner" { type = string }
variable "app" { type = string }
variable "install" { type = string }
variable "cost_center" { type = string }

resource "terraform_data" "bucket" {
  input = var.bucket_name
}

output "bucket_name" {
  value = terraform_data.bucket.output
}
