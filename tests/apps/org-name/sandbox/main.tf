variable "org_name" { type = string }
variable "app_name" { type = string }
variable "install_id" { type = string }

output "tags" {
  value = {
    "vendor" = var.org_name
    "app"    = var.app_name
    "id"     = var.install_id
  }
}
