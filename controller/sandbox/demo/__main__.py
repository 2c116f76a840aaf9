"""`python -m controller.sandbox.demo`: the demo (see app.py's `main`)."""

from controller.sandbox.demo.app import main

# Guarded so importing it (a check that the entry point exists) runs nothing.
if __name__ == "__main__":
    raise SystemExit(main())
