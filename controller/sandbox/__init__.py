"""Self-contained stand-ins for the controller's external systems (tests, benches, the sandbox).

A Kubernetes API server emulator and a throwaway OVN Northbound ovsdb-server (ovsdb.py).

`ApiServer` (apiserver.py) serves an `ObjectStore` (store.py) over real HTTP so the official
`kubernetes` client talks to it unchanged; `FaultInjector` (faults.py) injects failures;
`write_kubeconfig` (kubeconfig.py) points clients at it. Run it standalone with
`python -m controller.sandbox.apiserver --port N --kubeconfig PATH`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from controller.sandbox.faults import FaultInjector, RequestInfo, RequestRecord
from controller.sandbox.kubeconfig import write_kubeconfig
from controller.sandbox.resources import RESOURCES, ApiError, ResourceType
from controller.sandbox.store import ObjectStore

if TYPE_CHECKING:
    from controller.sandbox.apiserver import ApiServer

__all__ = [
    "RESOURCES",
    "ApiError",
    "ApiServer",
    "FaultInjector",
    "ObjectStore",
    "RequestInfo",
    "RequestRecord",
    "ResourceType",
    "write_kubeconfig",
]


def __getattr__(name: str) -> Any:
    # NOTE: imported lazily so `python -m controller.sandbox.apiserver` does not find its own
    # module already imported by the package (runpy warns about that).
    if name == "ApiServer":
        from controller.sandbox.apiserver import ApiServer  # noqa: PLC0415

        return ApiServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
