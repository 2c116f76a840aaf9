"""What the caches account for, as the garbage collector's sweeps judge it (see collector.py's
"What is kept" and "Safety rules").

`KeepRules.snapshot()` reads the caches once per pass into a `Kept`: the IPAM keys and the
LSP / IP CR names that alive pods (or their StatefulSet / VM, through the one `OwnerLookup`
policy), nodes and VMs account for. `key_kept_now` re-checks one key against the live caches
just before a deletion; `absent_key_kept` applies the owner rules to a key no cached pod
accounts for.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime

from controller.cache.keys import raw_field
from controller.core import annotations as ann
from controller.core import keep
from controller.core.constants import (
    LOGICAL_SWITCH_ANNOTATION_TEMPLATE,
    OVN_PROVIDER,
    annotation_key,
)
from controller.core.errors import MalformedObjectError
from controller.core.model import Pod
from controller.core.naming import node_port_name, pod_name_to_port_name
from controller.kube.api import KubeObject
from controller.pod_logic import get_name_by_pod, get_pod_key, is_ovn_provider, is_pod_alive
from controller.queues.clock import WallClock
from controller.view import CacheView, OwnerLookup, ParseCache

LOG = logging.getLogger(__name__)


class OrphanMarks:
    """The two-pass rule of a mark-and-sweep: an orphan is due only when the previous pass
    marked it too (collector.py's "Safety rules"); one found kept at deletion time is unmarked."""

    def __init__(self) -> None:
        self._marked: set[str] = set()

    def any(self) -> bool:
        return bool(self._marked)

    def due(self, orphans: Iterable[str]) -> list[str]:
        """Mark `orphans` for the next pass; returns, sorted, those the previous pass marked."""
        found = set(orphans)
        due = sorted(found & self._marked)
        self._marked = found
        return due

    def unmark(self, name: str) -> None:
        self._marked.discard(name)


@dataclass(frozen=True, slots=True)
class SweepActions:
    """What the port and IP CR sweeps do through the collector: delete under the pod key's
    lock (`locked`), release an IPAM key unless a pod holds it (`release`), count what went
    (`count`)."""

    locked: Callable[[str], AbstractContextManager[None]]
    release: Callable[[str, Kept], None]
    count: Callable[[str, int], None]


@dataclass(frozen=True, slots=True)
class Kept:
    """What the caches account for, read once per pass."""

    kept_keys: frozenset[str]
    kept_names: frozenset[str]
    present_keys: frozenset[str]  # keys of every pod in the cache, kept or not
    expected_ports: dict[str, str] = field(default_factory=dict)  # OVN port -> pod key
    nodes: frozenset[str] = frozenset()


class KeepRules:
    """The keep rules over the view (see the module docstring)."""

    def __init__(self, view: CacheView, *, keep_vm_ip: bool, wall_clock: WallClock) -> None:
        self._view = view
        self._keep_vm_ip = keep_vm_ip
        self._wall_clock = wall_clock
        self._owners = OwnerLookup(view)
        # each pod parsed once per resourceVersion, only while the start-up passes run
        self.pod_memo: ParseCache[Pod] | None = None

    def present_keys(self) -> frozenset[str]:
        """The keys of every cached pod, kept or not (a pod's own key, and its VM's key under
        --keep-vm-ip); the route and routing sweeps ask for it on every pass without judging
        each pod as `snapshot` does."""
        present: set[str] = set()
        for raw in self._view.pods_raw():
            meta = raw_field(raw, "metadata")
            present.add(f"{meta.get('namespace') or ''}/{meta.get('name') or ''}")
            if self._keep_vm_ip:  # a VM's pods hold their addresses under the VM's key
                with contextlib.suppress(MalformedObjectError):
                    present.add(get_pod_key(self._parse_pod(raw), True))
        return frozenset(present)

    def snapshot(self) -> Kept:
        now = self._wall_clock()
        kept_keys: set[str] = set()
        kept_names: set[str] = set()
        expected: dict[str, str] = {}
        for raw in self._view.pods_raw():
            try:
                pod = self._parse_pod(raw)
            except MalformedObjectError as exc:
                # Cannot judge it: keep everything under its name.
                meta = raw_field(raw, "metadata")
                key = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
                LOG.warning("gc keeps the resources of malformed pod %s: %s", key, exc)
                kept_keys.add(key)
                continue
            key = get_pod_key(pod, self._keep_vm_ip)
            if pod.host_network or not self.pod_kept(pod, now):
                continue
            kept_keys.add(key)
            name = get_name_by_pod(pod, self._keep_vm_ip)
            for provider in ann.allocated_providers(pod.annotations):
                port = pod_name_to_port_name(name, pod.namespace, provider)
                kept_names.add(port)
                if self._is_ovn_provided(pod, provider) and self._switch_known(pod, provider):
                    expected[port] = key
        nodes = self._view.node_names()
        kept_names.update(node_port_name(n) for n in nodes if n)
        if self._keep_vm_ip:
            for vm in self._view.virtual_machines():
                if vm.deletion_timestamp is None:
                    kept_keys.add(f"{vm.namespace}/{vm.name}")
        # read after the pods above: a pod cached meanwhile only counts as present (kept)
        present = self.present_keys()
        return Kept(frozenset(kept_keys), frozenset(kept_names), present, expected, nodes)

    def _parse_pod(self, raw: KubeObject) -> Pod:
        memo = self.pod_memo
        return Pod.from_dict(raw) if memo is None else memo.get(raw)

    def pod_kept(self, pod: Pod, now: datetime) -> bool:
        alive = is_pod_alive(pod, now)
        return self._owners.keeps(
            lambda owners: keep.pod_kept(
                pod, alive=alive, keep_vm_ip=self._keep_vm_ip, owners=owners
            )
        )

    def absent_key_kept(self, key: str) -> bool:
        """Keep rules for a key no kept pod accounts for: its VM, or its StatefulSet ordinal."""
        namespace, _, name = key.partition("/")
        return self._owners.keeps(
            lambda owners: keep.name_kept(
                namespace, name, keep_vm_ip=self._keep_vm_ip, owners=owners
            )
        )

    def key_kept_now(self, key: str) -> bool:
        """Re-check one key against the live caches (just before a deletion)."""
        raw = self._view.pod_raw(key)
        if raw is not None:
            try:
                pod = Pod.from_dict(raw)
            except MalformedObjectError:
                return True
            if self.pod_kept(pod, self._wall_clock()):
                return True
        return self.absent_key_kept(key)

    def _switch_known(self, pod: Pod, provider: str) -> bool:
        """The pod's annotated logical_switch is a subnet: only then can its port be lost (a
        port on a switch that does not exist was never made; the pod controller's inspection
        gives such a pod its Warning Event)."""
        switch = pod.annotations.get(
            annotation_key(LOGICAL_SWITCH_ANNOTATION_TEMPLATE, provider), ""
        )
        try:
            return self._view.subnet(switch) is not None
        except MalformedObjectError:
            return True  # a malformed subnet is still a subnet: its ports may be lost

    def _is_ovn_provided(self, pod: Pod, provider: str) -> bool:
        """kube-ovn `isOVNProvided`: the provider's subnet belongs to OVN (has an LSP)."""
        if provider == OVN_PROVIDER:
            return True
        switch = pod.annotations.get(
            annotation_key(LOGICAL_SWITCH_ANNOTATION_TEMPLATE, provider), ""
        )
        try:
            subnet = self._view.subnet(switch)
        except MalformedObjectError:
            return False
        return subnet is not None and is_ovn_provider(subnet.provider)
