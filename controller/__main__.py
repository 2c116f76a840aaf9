"""`python -m controller`: the controller's command line (controller.app.main)."""

from controller.app import main

if __name__ == "__main__":
    raise SystemExit(main())
