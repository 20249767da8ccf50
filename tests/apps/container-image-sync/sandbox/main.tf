variable "install_id" { type = string }

output "ecr" {
  value = { repository_url = "000000000000.dkr.ecr.us-east-1.amazonaws.com/${var.install_id}" }
}
