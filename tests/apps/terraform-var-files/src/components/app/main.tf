variable "install_id" { type = string }
variable "tags" { type = map(string) }
variable "min_size" { type = number }
variable "max_size" { type = number }

resource "terraform_data" "app" {
  input = { id = var.install_id, min = var.min_size, max = var.max_size, tags = var.tags }
}

output "sizes" {
  value = "${var.min_size}-${var.max_size}"
}
