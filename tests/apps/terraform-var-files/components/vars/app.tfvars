tags = {
  "install.nuon.co/id" = "{{ .nuon.install.id }}"
  "sandbox.tags"       = "{{ index .nuon.sandbox.outputs.tags "install.nuon.co/id" }}"
}
