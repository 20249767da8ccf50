variable "bucket_name" { type = string }
variable "region" { type = string }

resource "terraform_data" "bucket" {
  input = var.bucket_name
}

output "bucket_name" {
  value = terraform_data.bucket.output
}
