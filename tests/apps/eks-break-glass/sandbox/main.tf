variable "cluster_name" { type = string }
variable "cluster_version" { type = string }
variable "additional_namespaces" {
  type    = list(string)
  default = []
}
variable "maintenance_role_eks_access_entry_policy_associations" {
  type    = any
  default = {}
}
variable "break_glass_iam_role_arn" {
  type    = string
  default = ""
}
variable "break_glass_role_eks_kubernetes_groups" {
  type    = list(string)
  default = []
}
variable "break_glass_role_eks_access_entry_policy_associations" {
  type    = any
  default = {}
}

resource "terraform_data" "cluster" {
  input = {
    name        = var.cluster_name
    break_glass = var.break_glass_iam_role_arn
  }
}

output "cluster" {
  value = {
    name        = terraform_data.cluster.output.name
    break_glass = terraform_data.cluster.output.break_glass != ""
  }
}
