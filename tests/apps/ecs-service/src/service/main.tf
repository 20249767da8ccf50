variable "region" { type = string }
variable "vpc_id" { type = string }
variable "nuon_id" { type = string }
variable "cluster_arn" { type = string }
variable "desired_count" { type = number }
variable "image_repository" { type = string }
variable "image_tag" { type = string }

resource "terraform_data" "service" {
  input = {
    cluster = var.cluster_arn
    image   = "${var.image_repository}:${var.image_tag}"
    count   = var.desired_count
  }
}

output "service_name" {
  value = "whoami-${var.nuon_id}"
}
