variable "region" { type = string }
variable "vpc_id" { type = string }
variable "nuon_id" { type = string }

resource "terraform_data" "cluster" {
  input = "arn:aws:ecs:${var.region}:000000000000:cluster/${var.nuon_id}"
}

output "cluster_arn" {
  value = terraform_data.cluster.output
}
