variable "database_url" { type = string }
variable "cache_url" { type = string }

output "url" {
  value = "http://api.internal"
}
