package nuon

warn contains msg if {
  input.review.kind.kind == "ClusterRole"
  msg := sprintf("cluster role %s in helm chart", [input.review.object.metadata.name])
}
