"""`python -m controller`: the controller's command line (controller.cli.main)."""

from controller.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
