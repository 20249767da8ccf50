variable "vpc_id" { type = string }

output "subnet_ids" {
  value = ["${var.vpc_id}-a", "${var.vpc_id}-b"]
}
