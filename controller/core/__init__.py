"""The pure core: values, rules and parsers with no threads, no I/O and no client libraries.

Everything above (pod_logic, the adapters, the reconcilers) builds on these modules; nothing here
imports kubernetes, ovsdbapp, ovs, urllib3 or prometheus_client (import-linter enforces it).
"""
