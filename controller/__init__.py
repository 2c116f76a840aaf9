"""A Python re-implementation of kube-ovn's pod network controller (kube-ovn v1.8.18 pod.go)."""
