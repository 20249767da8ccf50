variable "bucket_name" { type = string }
variable "project_id" { type = string }

resource "terraform_data" "reader" {
  input = "gs://${var.bucket_name}"
}

output "bucket_url" {
  value = terraform_data.reader.output
}
