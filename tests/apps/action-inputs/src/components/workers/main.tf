variable "namespace" { type = string }

output "deployment" {
  value = "${var.namespace}/app-workers"
}
