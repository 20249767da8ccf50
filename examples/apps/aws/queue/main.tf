terraform {
  required_providers {
    aws = { source = "hashicorp/aws", version = ">= 5.0" }
  }
}

# The region and the credentials are the runner's: the job's operation
# role, handed over by `nuon-runner run --credentials aws`.
provider "aws" {
  # Path-style S3 addresses work against AWS and against a fake account
  # on loopback alike.
  s3_use_path_style = true
}

variable "install_id" {
  type = string
}

variable "bucket_arn" {
  type = string
}

resource "aws_sqs_queue" "events" {
  name                      = "events-${var.install_id}"
  message_retention_seconds = 86400
  tags                      = { "nuon:install" = var.install_id, "bucket" = var.bucket_arn }
}

output "queue_arn" {
  value = aws_sqs_queue.events.arn
}

output "queue_url" {
  value = aws_sqs_queue.events.url
}
