variable "cluster_name" { type = string }
variable "cluster_version" { type = string }
variable "enable_nuon_dns" { type = string }
variable "public_root_domain" { type = string }
variable "internal_root_domain" { type = string }
variable "cluster_endpoint_public_access" { type = string }
variable "additional_namespaces" {
  type    = list(string)
  default = []
}
variable "min_size" {
  type    = number
  default = 1
}
variable "max_size" {
  type    = number
  default = 1
}
variable "desired_size" {
  type    = number
  default = 1
}

resource "terraform_data" "cluster" {
  input = {
    name    = var.cluster_name
    version = var.cluster_version
  }
}

output "cluster" {
  value = {
    name             = terraform_data.cluster.output.name
    endpoint         = "https://${terraform_data.cluster.output.name}.eks.local"
    oidc_provider    = "oidc.eks.local/id/${var.cluster_name}"
    cluster_version  = var.cluster_version
  }
}

output "nuon_dns" {
  value = {
    enabled         = var.enable_nuon_dns == "true"
    public_domain   = { name = var.public_root_domain, zone_id = "Z-PUBLIC" }
    internal_domain = { name = var.internal_root_domain, zone_id = "Z-INTERNAL" }
  }
}

output "account" {
  value = { id = "000000000000", region = "us-east-1" }
}
