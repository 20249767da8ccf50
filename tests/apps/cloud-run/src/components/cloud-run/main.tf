variable "project_id" { type = string }
variable "region" { type = string }
variable "image" { type = string }
variable "install_id" { type = string }

resource "terraform_data" "service" {
  input = "projects/${var.project_id}/locations/${var.region}/services/whoami-${var.install_id}"
}

output "service_url" {
  value = "https://whoami-${var.install_id}-${var.region}.a.run.app"
}
