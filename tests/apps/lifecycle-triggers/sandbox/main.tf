variable "cluster_name" { type = string }

output "cluster" {
  value = { name = var.cluster_name }
}
