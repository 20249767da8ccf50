variable "db_endpoint" { type = string }

output "url" {
  value = "http://api"
}
