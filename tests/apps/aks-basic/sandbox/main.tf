variable "nuon_id" { type = string }
variable "location" { type = string }
variable "resource_group_name" { type = string }
variable "vnet_name" { type = string }
variable "private_subnet_names" { type = string }
variable "public_subnet_names" { type = string }
variable "vm_size" { type = string }
variable "public_root_domain" { type = string }
variable "internal_root_domain" { type = string }

resource "terraform_data" "aks" {
  input = "/resourceGroups/${var.resource_group_name}/managedClusters/${var.nuon_id}"
}

output "cluster" {
  value = { id = terraform_data.aks.output, location = var.location }
}
