"""`SubnetIpamTracker`: IPAM follows Subnet add/update/delete when the subnet controller is off.

With `--enable-subnet-controller=false` another controller (kube-ovn's own) owns the Subnets
and their logical switches, but this process still allocates pod addresses from its own IPAM,
so IPAM must know every subnet as it is now, not only as it was at start-up:

* a Subnet added or whose spec changed is registered (`IPAM.add_or_update_subnet`) with its
  formatted CIDR and exclude list (kube-ovn `formatSubnet`: the gateway is always excluded);
  allocations the new spec no longer covers are dropped by IPAM and logged;
* a Subnet deleted, or being deleted, is forgotten (`IPAM.delete_subnet`), so a pod delete does
  not look for a subnet that is gone;
* a spec that does not format is logged and left as IPAM had it (the owning controller reports
  it on the Subnet);
* `on_registered(name)` (optional) runs after a subnet was registered: pods waiting for it are
  re-queued.

Callbacks run on the informer's thread: in-memory IPAM work only, and they never raise.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from controller.cache.keys import object_name, raw_field
from controller.core.errors import MalformedObjectError
from controller.core.subnet_spec import format_subnet_spec
from controller.ipam import IPAM
from controller.ipam.errors import IPAMError
from controller.kube.api import KubeObject
from controller.runtime.leader_gated import LeaderGated

LOG = logging.getLogger(__name__)


class SubnetIpamTracker:
    """Keeps IPAM in step with the Subnets (see the module docstring); its informer handler is
    `event_handler()`."""

    def __init__(
        self,
        ipam: IPAM,
        is_leader: Callable[[], bool],
        on_registered: Callable[[str], None] | None = None,
    ) -> None:
        self._ipam = ipam
        self._is_leader = is_leader
        self._on_registered = on_registered

    def event_handler(self) -> LeaderGated:
        return LeaderGated(
            self._is_leader, added=self._added, updated=self._updated, deleted=self._deleted
        )

    def _added(self, obj: KubeObject, is_in_initial_list: bool) -> None:
        self._apply(obj)

    def _updated(self, old: KubeObject, new: KubeObject) -> None:
        # NOTE: status writes (every allocation's subnet counts) change nothing IPAM holds.
        if old.get("spec") == new.get("spec") and not raw_field(new, "metadata").get(
            "deletionTimestamp"
        ):
            return
        self._apply(new)

    def _deleted(self, obj: KubeObject) -> None:
        name = object_name(obj)
        if name:
            self._ipam.delete_subnet(name)

    def _apply(self, obj: KubeObject) -> None:
        name = object_name(obj)
        if not name:
            return
        if raw_field(obj, "metadata").get("deletionTimestamp"):
            self._ipam.delete_subnet(name)
            return
        try:
            formatted = format_subnet_spec(name, raw_field(obj, "spec"))
            stale = self._ipam.add_or_update_subnet(
                name, formatted["cidrBlock"], formatted["excludeIps"]
            )
        except (MalformedObjectError, IPAMError) as exc:
            LOG.warning("subnet %s not tracked in IPAM: %s", name, exc)
            return
        for item in stale:
            LOG.warning(
                "subnet %s: %s no longer holds %s (%s)", name, item.pod_key, item.ip, item.reason
            )
        if self._on_registered is not None:
            try:
                self._on_registered(name)
            except Exception:
                LOG.exception("re-queueing the pods of subnet %s failed", name)
