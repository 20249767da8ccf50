variable "greeting" { type = string }

output "greeting" {
  value = var.greeting
}
