variable "enable_nuon_dns" { type = string }
variable "public_root_domain" { type = string }
variable "internal_root_domain" { type = string }

output "nuon_dns" {
  value = {
    public_domain   = { name = var.public_root_domain, zone_id = "Z-PUBLIC" }
    internal_domain = { name = var.internal_root_domain, zone_id = "Z-INTERNAL" }
  }
}
