variable "install_id" {
  type = string
}

resource "terraform_data" "network" {
  input = "net-${var.install_id}"
}

output "network_id" {
  value = terraform_data.network.output
}
