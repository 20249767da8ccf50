variable "cluster_name" { type = string }
variable "project_id" { type = string }
variable "region" { type = string }
variable "enable_nuon_dns" { type = string }
variable "public_root_domain" { type = string }
variable "internal_root_domain" { type = string }

resource "terraform_data" "cluster" {
  input = "projects/${var.project_id}/locations/${var.region}/clusters/${var.cluster_name}"
}

output "cluster" {
  value = { id = terraform_data.cluster.output, name = var.cluster_name }
}

output "nuon_dns" {
  value = {
    public_domain   = { name = var.public_root_domain }
    internal_domain = { name = var.internal_root_domain }
  }
}
