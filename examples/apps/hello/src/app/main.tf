variable "greeting" {
  type = string
}

variable "replicas" {
  type = number
}

variable "database_url" {
  type = string
}

variable "api_key" {
  type      = string
  sensitive = true
}

resource "terraform_data" "app" {
  count = var.replicas
  input = "${var.greeting} from replica ${count.index}, using ${var.database_url}"
}

output "messages" {
  value = terraform_data.app[*].output
}
