variable "nodes" { type = number }

output "endpoint" {
  value = "cache.internal:6379"
}
