"""Kubernetes API edges of the controller: ports (api.py), adapter (client.py), fake (fake.py)."""
