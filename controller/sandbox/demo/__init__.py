"""The demo: the controller against a local sandbox (app.py), on the emulator or the real control
plane (real.py), ending with a connectivity matrix (matrix.py). Run it as
`python -m controller.sandbox.demo`.
"""
