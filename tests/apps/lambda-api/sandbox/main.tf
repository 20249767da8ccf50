variable "enable_nuon_dns" { type = string }
variable "public_root_domain" { type = string }
variable "internal_root_domain" { type = string }

output "account" {
  value = { id = "000000000000", region = "us-east-1" }
}

output "nuon_dns" {
  value = {
    public_domain   = { name = var.public_root_domain }
    internal_domain = { name = var.internal_root_domain }
  }
}
