variable "public_root_domain" { type = string }

output "nuon_dns" {
  value = { public_domain = { name = var.public_root_domain } }
}

output "account" {
  value = { id = "000000000000", region = "us-east-1" }
}
