variable "name" { type = string }
variable "network_id" { type = string }

resource "terraform_data" "db" {
  input = "${var.name}.${var.network_id}"
}

output "host" {
  value = terraform_data.db.output
}
