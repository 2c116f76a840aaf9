"""`python -m cmd.controller`: a thin shim over controller.cli (see cmd/__init__.py)."""

from controller.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
