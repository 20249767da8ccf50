variable "public_root_domain" { type = string }

output "public_domain" {
  value = var.public_root_domain
}
