package nuon

warn contains msg if {
  some rc in input.plan.resource_changes
  rc.type == "aws_acm_certificate"
  startswith(rc.change.after.domain_name, "*.")
  msg := sprintf("certificate %s is a wildcard", [rc.address])
}
