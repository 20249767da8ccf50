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

variable "cidr" {
  type = string
}

data "aws_availability_zones" "available" {
  state = "available"
}

resource "aws_vpc" "app" {
  cidr_block           = var.cidr
  enable_dns_hostnames = true
  tags                 = { "nuon:install" = var.install_id, Name = "app-${var.install_id}" }
}

resource "aws_subnet" "app" {
  count             = 2
  vpc_id            = aws_vpc.app.id
  cidr_block        = cidrsubnet(var.cidr, 8, count.index)
  availability_zone = data.aws_availability_zones.available.names[count.index]
  tags              = { "nuon:install" = var.install_id }
}

output "vpc_id" {
  value = aws_vpc.app.id
}

output "subnet_ids" {
  value = aws_subnet.app[*].id
}
