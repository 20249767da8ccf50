package nuon

warn contains msg if {
  some rc in input.plan.resource_changes
  rc.type == "aws_lambda_function"
  rc.change.after.memory_size < 256
  msg := sprintf("lambda %s has only %d MB of memory", [rc.address, rc.change.after.memory_size])
}
