"""The consistency audit and the `check` command line that runs it (check.py).

`audit.audit(snapshot, config)` is the entry point (audit.py); its checks live in pods.py,
orphans.py and ipam_rebuild.py over the shared state of state.py, and its model
(`ClusterSnapshot`, `Finding`, `AuditReport`) in findings.py.
"""
