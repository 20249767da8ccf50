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

variable "queue_arn" {
  type = string
}

# What the app may do: read the bucket, and send to and read the queue.
resource "aws_iam_policy" "app" {
  name = "app-${var.install_id}"
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      { Effect = "Allow", Action = ["s3:GetObject", "s3:ListBucket"], Resource = [var.bucket_arn, "${var.bucket_arn}/*"] },
      { Effect = "Allow", Action = ["sqs:SendMessage", "sqs:ReceiveMessage"], Resource = var.queue_arn },
    ]
  })
  tags = { "nuon:install" = var.install_id }
}

resource "aws_iam_role" "app" {
  name = "app-${var.install_id}"
  assume_role_policy = jsonencode({
    Version   = "2012-10-17"
    Statement = [{ Effect = "Allow", Principal = { Service = "ec2.amazonaws.com" }, Action = "sts:AssumeRole" }]
  })
  tags = { "nuon:install" = var.install_id }
}

resource "aws_iam_role_policy_attachment" "app" {
  role       = aws_iam_role.app.name
  policy_arn = aws_iam_policy.app.arn
}

output "role_arn" {
  value = aws_iam_role.app.arn
}
