"""`python -m controller.sandbox.apiserver`: the emulator standalone (see server.py's `main`)."""

from controller.sandbox.apiserver.server import main

# Guarded so importing it (a check that the entry point exists) runs nothing.
if __name__ == "__main__":
    raise SystemExit(main())
