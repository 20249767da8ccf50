variable "nuon_id" { type = string }
variable "tags" { type = map(string) }

output "tags" {
  value = var.tags
}
