"""`python -m cmd.controller`: a thin shim over controller.app (see cmd/__init__.py)."""

from controller.app import main

if __name__ == "__main__":
    raise SystemExit(main())
