variable "public_root_domain" { type = string }

output "nuon_dns" {
  value = { public_domain = { name = var.public_root_domain } }
}
