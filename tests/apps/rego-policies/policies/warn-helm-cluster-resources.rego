package nuon

cluster_kinds := {"CustomResourceDefinition", "Namespace", "ClusterRole", "ClusterRoleBinding"}

warn contains msg if {
  kind := input.review.kind.kind
  cluster_kinds[kind]
  name := object.get(input.review.object.metadata, "name", "")
  msg := sprintf("cluster-level resource %s/%s detected in helm chart", [kind, name])
}
