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

resource "aws_s3_bucket" "data" {
  bucket = "data-${var.install_id}"
  tags   = { "nuon:install" = var.install_id }
}

resource "aws_s3_bucket_versioning" "data" {
  bucket = aws_s3_bucket.data.id
  versioning_configuration {
    status = "Enabled"
  }
}

# Nothing but TLS reaches the bucket.
resource "aws_s3_bucket_policy" "data" {
  bucket = aws_s3_bucket.data.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "TLSOnly"
      Effect    = "Deny"
      Principal = "*"
      Action    = "s3:*"
      Resource  = [aws_s3_bucket.data.arn, "${aws_s3_bucket.data.arn}/*"]
      Condition = { Bool = { "aws:SecureTransport" = "false" } }
    }]
  })
}

output "bucket_name" {
  value = aws_s3_bucket.data.bucket
}

output "bucket_arn" {
  value = aws_s3_bucket.data.arn
}
