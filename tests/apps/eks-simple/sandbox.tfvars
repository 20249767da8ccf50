additional_namespaces = ["whoami"]
min_size              = 2
max_size              = 3
desired_size          = 2
