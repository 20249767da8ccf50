variable "cluster_name" { type = string }
variable "project_id" { type = string }

resource "terraform_data" "app" {
  input = "${var.project_id}/${var.cluster_name}"
}

output "where" {
  value = terraform_data.app.output
}
