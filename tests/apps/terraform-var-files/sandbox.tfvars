nuon_id = "{{ .nuon.install.id }}"
tags = {
  "install.nuon.co/id" = "{{ .nuon.install.id }}"
}
