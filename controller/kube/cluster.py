"""The few API calls of start-up and the support controllers that `KubeApi` does not cover.

`ClusterApi` is the port: the default Vpc (create, status), Subnet spec writes (kube-ovn's
`formatSubnet` normalisation) and API-group discovery (is kubevirt / multus installed?).
`ApiClientClusterApi` is the adapter over a `kubernetes.client.ApiClient`, raw JSON through
`controller.cache.listwatch.api_request_json`; errors come out as `controller.kube.errors`
(`NotFoundError`, `ConflictError`, `AlreadyExistsError`, ...), as `KubeApi`'s do.

Writes of whole objects are PUTs carrying the resourceVersion that was read, so a concurrent
writer turns them into a `ConflictError` (the caller's queue retries) instead of being lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from controller.cache.errors import ConnectionFailedError, StatusError
from controller.cache.listwatch import api_request_json
from controller.constants import KUBEOVN_API_VERSION
from controller.kube.api import KubeObject, check_name
from controller.kube.errors import KubeApiError, KubeUnavailableError, error_from_status

VPCS = "/apis/kubeovn.io/v1/vpcs"
SUBNETS = "/apis/kubeovn.io/v1/subnets"
DEFAULT_TIMEOUT = (5.0, 30.0)


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


class ApiClientClusterApi:
    """`ClusterApi` over a `kubernetes.client.ApiClient` (thread-safe: no state of its own)."""

    def __init__(self, api_client: Any, *, timeout: tuple[float, float] = DEFAULT_TIMEOUT) -> None:
        self._api = api_client
        self._timeout = timeout

    def _call(self, method: str, path: str, body: Any = None) -> KubeObject:
        try:
            result = api_request_json(self._api, method, path, body=body, timeout=self._timeout)
        except StatusError as err:
            raise error_from_status(err.code, err.reason, err.message) from err
        except ConnectionFailedError as err:
            raise KubeUnavailableError(0, "ConnectionFailed", str(err)) from err
        if not isinstance(result, dict):
            raise KubeApiError(200, "BadResponse", f"{method} {path}: not a JSON object")
        return result

    def get_vpc(self, name: str) -> KubeObject | None:
        try:
            return self._call("GET", f"{VPCS}/{check_name('vpc', name)}")
        except KubeApiError as err:
            if err.status == 404:
                return None
            raise

    def create_vpc(self, body: Mapping[str, Any]) -> KubeObject:
        full = {"apiVersion": KUBEOVN_API_VERSION, "kind": "Vpc", **dict(body)}
        return self._call("POST", VPCS, full)

    def replace_vpc_status(self, vpc: Mapping[str, Any], status: Mapping[str, Any]) -> KubeObject:
        name = check_name("vpc", str((vpc.get("metadata") or {}).get("name", "")))
        body = {**dict(vpc), "status": dict(status)}
        body.setdefault("apiVersion", KUBEOVN_API_VERSION)
        body.setdefault("kind", "Vpc")
        return self._call("PUT", f"{VPCS}/{name}/status", body)

    def replace_subnet(self, subnet: Mapping[str, Any]) -> KubeObject:
        name = check_name("subnet", str((subnet.get("metadata") or {}).get("name", "")))
        body = dict(subnet)
        body.setdefault("apiVersion", KUBEOVN_API_VERSION)
        body.setdefault("kind", "Subnet")
        return self._call("PUT", f"{SUBNETS}/{name}", body)

    def api_group_exists(self, group: str, version: str) -> bool:
        try:
            self._call("GET", f"/apis/{group}/{version}")
        except KubeApiError as err:
            if err.status == 404:
                return False
            raise
        return True


def _conforms(c: ApiClientClusterApi) -> ClusterApi:  # mypy checks the adapter fits the port
    return c
