package nuon

deny contains msg if {
  some rc in input.plan.resource_changes
  rc.type == "aws_vpc"
  not startswith(rc.change.after.cidr_block, "10.")
  msg := sprintf("VPC %s must use a 10.0.0.0/8 CIDR", [rc.address])
}
