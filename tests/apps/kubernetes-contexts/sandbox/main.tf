variable "cluster_name" { type = string }

output "cluster" {
  value = { name = var.cluster_name, endpoint = "https://sandbox.eks.local" }
}

output "vpc" {
  value = { id = "vpc-0123", private_subnet_ids = ["subnet-a", "subnet-b"] }
}
