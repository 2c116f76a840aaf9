"""The few API calls of start-up and the support controllers that `KubeApi` does not cover.

`ClusterApi` is the port: the default Vpc (create, status), Subnet spec writes (kube-ovn's
`formatSubnet` normalisation) and API-group discovery (is kubevirt / multus installed?).
`controller.kube.client.KubeClient` is the adapter (one transport, timeouts and request metrics
for every API call); errors come out as `controller.apiclient.errors` (`NotFoundError`,
`ConflictError`, `AlreadyExistsError`, ...), as `KubeApi`'s do.

Writes of whole objects are PUTs carrying the resourceVersion that was read, so a concurrent
writer turns them into a `ConflictError` (the caller's queue retries) instead of being lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from controller.kube.api import KubeObject


class ClusterApi(Protocol):
    def get_vpc(self, name: str) -> KubeObject | None: ...

    def create_vpc(self, body: Mapping[str, Any]) -> KubeObject:
        """Create a Vpc; `AlreadyExistsError` if the name is taken."""
        ...

    def replace_vpc_status(self, vpc: Mapping[str, Any], status: Mapping[str, Any]) -> KubeObject:
        """PUT `status` on the status subresource of the Vpc as read (its resourceVersion)."""
        ...

    def replace_subnet(self, subnet: Mapping[str, Any]) -> KubeObject:
        """PUT a Subnet (spec changes), guarded by its resourceVersion."""
        ...

    def api_group_exists(self, group: str, version: str) -> bool:
        """True when the API server serves `/apis/<group>/<version>`."""
        ...
