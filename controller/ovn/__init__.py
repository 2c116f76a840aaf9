"""OVN Northbound client: the domain verbs the pod controller needs (see api.py)."""
