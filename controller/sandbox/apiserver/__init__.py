"""The Kubernetes API server emulator: real HTTP (server.py) over an in-memory store (store.py).

`python -m controller.sandbox.apiserver --port N --kubeconfig PATH` runs it standalone.
"""
