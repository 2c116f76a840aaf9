"""The consistency audit (audit.py) and the `check` command line that runs it (check.py)."""
