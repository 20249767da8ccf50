variable "install_id" { type = string }

output "events_topic" {
  value = "events-${var.install_id}"
}
