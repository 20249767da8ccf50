variable "project_id" { type = string }
variable "gcp_project" { type = string }
variable "region" { type = string }
variable "install_id" { type = string }
variable "cluster_id" { type = string }

resource "terraform_data" "bucket" {
  input = "gs://${var.project_id}-${var.install_id}"
}

output "bucket_url" {
  value = terraform_data.bucket.output
}
