"""`check`: audit a live cluster once and print the report (the I/O around `audit.audit`).

`run_check(config)` lists pods, namespaces, nodes, subnets, IP CRs, VPCs and SecurityGroups from
the API server (uncached, paged), reads the kube-ovn logical switch ports, the cluster router's
static routes and NAT rules and the security groups' rows from the OVN Northbound database,
runs `audit()` (an address the StatefulSet / VM lists leave ownerless is confirmed with a GET of
its owner first, as the controller does) and prints `AuditReport.render()`. It never writes
anything.

With `--dataplane` (and `--ovn-sb-addr`, optionally `--ovs-db`) it also reads the SB's port
bindings and chassis and an OVS database's interfaces and adds `controller.audit.dataplane`'s
findings (a port no chassis bound, an interface whose iface-id names no port); the report's
"checked" line then counts the bindings and interfaces it read.

Exit codes: 0 clean, 1 findings (with `strict=True`, pods not converged yet count as findings
too), 2 when the API server or the NB database cannot be reached or read (the reason goes to the
output instead of a report).

NOTE: the API lists and the NB read are not one atomic snapshot. Against a controller that is
still working, a pod created between the two reads shows up as e.g. `lsp-missing`; callers that
need a verdict (the fault-injection suite) wait until the cluster is quiet, or re-run until
`settled`. `collect_snapshot` and `check` take the two readers as Protocols, so tests and other
tools can run the same audit over fakes.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Protocol, TextIO, TypeVar

from controller.apiclient.errors import ForbiddenError, KubeApiError, KubeConfigError
from controller.audit.audit import AuditReport, ClusterSnapshot, audit
from controller.audit.dataplane import (
    DataPlaneSnapshot,
    OvsInterface,
    PortBinding,
    audit_dataplane,
)
from controller.config import Config
from controller.core import router_policy as rp
from controller.core.constants import VENDOR
from controller.core.errors import MalformedObjectError
from controller.core.model import Namespace, Node, Pod, StatefulSet, Subnet, VirtualMachine, Vpc
from controller.core.object_fields import parse_time
from controller.kube.api import ClusterLister, KubeObject
from controller.ovn.api import (
    AddressSetInfo,
    NatRule,
    OvnError,
    PortGroupInfo,
    PortInfo,
    RouterPolicy,
    SecurityGroupRows,
    StaticRoute,
)
from controller.ovn.ovsdb_query import OvsdbQueryError, SslFiles, select
from controller.queues.clock import WallClock, utcnow
from controller.view import OwnerApi

LOG = logging.getLogger(__name__)

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_UNAVAILABLE = 2

T = TypeVar("T")


class NbReader(Protocol):
    """The read-only part of `controller.ovn.api.NbClient` the audit needs."""

    def list_ports(self, vendor: str = VENDOR) -> list[PortInfo]: ...

    def list_static_routes(self, router: str) -> list[StaticRoute]: ...

    def list_nat_rules(self, router: str) -> list[NatRule]: ...

    def list_router_policies(self, router: str) -> list[RouterPolicy]: ...

    def list_address_sets(self, external_ids: Mapping[str, str]) -> list[AddressSetInfo]: ...

    def list_sg_port_groups(self) -> list[PortGroupInfo]: ...

    def list_security_groups(self) -> list[SecurityGroupRows]: ...


class AuditApi(ClusterLister, OwnerApi, Protocol):
    """The cluster's lists, and the owner GETs that confirm what the StatefulSet / VM lists
    say is gone (`KubeClient` and the fakes have both)."""


def _convert(
    items: Iterable[KubeObject], factory: Callable[[object], T], problems: list[str]
) -> tuple[T, ...]:
    out = []
    for item in items:
        try:
            out.append(factory(item))
        except MalformedObjectError as e:
            problems.append(str(e))
    return tuple(out)


def collect_snapshot(
    kube: ClusterLister,
    nb: NbReader,
    *,
    cluster_router: str,
    wall_clock: WallClock = utcnow,
) -> ClusterSnapshot:
    """Read everything the audit needs; malformed objects become `snapshot.problems`.

    Raises the readers' own errors (`KubeApiError`, `OvnError`).
    """
    problems: list[str] = []
    now = wall_clock()
    kube_pods = kube.list_pods()
    pods = _convert(kube_pods, Pod.from_dict, problems)
    namespaces = _convert(kube.list_namespaces(), Namespace.from_dict, problems)
    nodes = _convert(kube.list_nodes(), Node.from_dict, problems)
    subnets = _convert(kube.list_subnets(), Subnet.from_dict, problems)
    vpcs = _convert(kube.list_vpcs(), Vpc.from_dict, problems)
    ips = tuple(kube.list_ips())
    statefulsets = _convert(kube.list_statefulsets(), StatefulSet.from_dict, problems)
    vms = _convert(kube.list_virtual_machines(), VirtualMachine.from_dict, problems)
    created = _creation_times(kube_pods)
    try:
        events: tuple[KubeObject, ...] | None = tuple(kube.list_events())
    except ForbiddenError as e:
        # NOTE: an audit allowed to read everything but Events still runs (the chart's
        # ServiceAccount only writes them); refused pods are then reported as pending.
        LOG.warning("cannot list Events, refused pods show as pending: %s", e)
        events = None
    return ClusterSnapshot(
        now=now,
        pods=pods,
        namespaces=namespaces,
        subnets=subnets,
        nodes=nodes,
        ips=ips,
        vpcs=vpcs,
        ports=tuple(nb.list_ports(VENDOR)),
        routes=tuple(nb.list_static_routes(cluster_router)),
        nat_rules=tuple(nb.list_nat_rules(cluster_router)),
        policies=tuple(nb.list_router_policies(cluster_router)),
        address_sets=tuple(nb.list_address_sets({rp.ROUTE_KIND_KEY: rp.KIND_GATEWAY})),
        port_groups=tuple(nb.list_sg_port_groups()),
        security_groups=tuple(kube.list_security_groups()),
        sg_rows=tuple(nb.list_security_groups()),
        problems=tuple(problems),
        statefulsets=statefulsets,
        virtual_machines=vms,
        events=events,
        created=created,
    )


def _creation_times(raw_pods: Iterable[KubeObject]) -> dict[str, datetime]:
    """pod key -> metadata.creationTimestamp (pods without a readable one are left out)."""
    out: dict[str, datetime] = {}
    for raw in raw_pods:
        meta = raw.get("metadata") if isinstance(raw, Mapping) else None
        if not isinstance(meta, Mapping):
            continue
        stamp = meta.get("creationTimestamp")
        created = parse_time(stamp) if isinstance(stamp, str) else None
        if created is not None:
            out[f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"] = created
    return out


def exit_code(report: AuditReport, *, strict: bool = False) -> int:
    """0 when the report passes (`settled` if strict, else `ok`), 1 otherwise."""
    return EXIT_CLEAN if report.passed(strict=strict) else EXIT_FINDINGS


def read_dataplane(config: Config) -> DataPlaneSnapshot:
    """The SB's port bindings (with their chassis names) and, with `--ovs-db`, the OVS
    interfaces that carry an iface-id. Raises `OvsdbQueryError`."""
    tls = SslFiles(config.ovn_nb_ssl_key, config.ovn_nb_ssl_cert, config.ovn_nb_ssl_ca)
    timeout = config.ovn_timeout
    sb, sb_db = config.ovn_sb_addr, "OVN_Southbound"
    chassis = {
        str(r["_uuid"]): str(r["name"])
        for r in select(sb, sb_db, "Chassis", ["_uuid", "name"], timeout=timeout, tls=tls)
    }
    bindings = []
    for r in select(
        sb, sb_db, "Port_Binding", ["logical_port", "chassis", "type"], timeout=timeout, tls=tls
    ):
        ref = r.get("chassis")
        ref = ref[0] if isinstance(ref, list) and ref else ref  # optional: [] or one uuid
        bindings.append(
            PortBinding(
                str(r["logical_port"]), chassis.get(str(ref or ""), ""), str(r.get("type") or "")
            )
        )
    interfaces = None
    if config.ovs_db:
        rows = select(
            config.ovs_db,
            "Open_vSwitch",
            "Interface",
            ["name", "external_ids"],
            timeout=timeout,
            tls=tls,
        )
        interfaces = tuple(
            OvsInterface(str(r["name"]), str(r["external_ids"]["iface-id"]))
            for r in rows
            if isinstance(r.get("external_ids"), dict) and r["external_ids"].get("iface-id")
        )
    return DataPlaneSnapshot(tuple(bindings), interfaces)


def check(
    kube: AuditApi,
    nb: NbReader,
    config: Config,
    *,
    out: TextIO,
    strict: bool = False,
    wall_clock: WallClock = utcnow,
    dataplane: Callable[[], DataPlaneSnapshot] | None = None,
) -> int:
    """Collect, audit, print the report to `out`; the exit code (see the module docstring).
    With `dataplane`, its snapshot is cross-checked too (`controller.audit.dataplane`)."""
    try:
        snapshot = collect_snapshot(
            kube, nb, cluster_router=config.cluster_router, wall_clock=wall_clock
        )
    except KubeApiError as e:
        out.write(f"check: cannot read the Kubernetes API: {e}\n")
        return EXIT_UNAVAILABLE
    except OvnError as e:
        out.write(f"check: cannot read the OVN Northbound database: {e}\n")
        return EXIT_UNAVAILABLE
    report = audit(snapshot, config, owner_api=kube)
    if dataplane is not None:
        try:
            dp = dataplane()
        except OvsdbQueryError as e:
            out.write(f"check: cannot read the data plane (SB/OVS): {e}\n")
            return EXIT_UNAVAILABLE
        extra = audit_dataplane(snapshot, dp)
        report = dataclasses.replace(
            report,
            findings=report.findings + extra.findings,
            pending=report.pending + extra.pending,
            counts={**report.counts, **extra.counts},
        )
    out.write(report.render(strict=strict))
    return exit_code(report, strict=strict)


def run_check(config: Config, *, out: TextIO | None = None, strict: bool = False) -> int:
    """The `check` sub-command: connect with `config`'s kubeconfig and NB address, audit once."""
    # NOTE: concrete adapters are imported here, not at module level, so `check()` and
    # `collect_snapshot()` stay importable (and testable) without ovsdbapp / kubernetes.
    from controller.kube.client import KubeClient, load_api_client  # noqa: PLC0415
    from controller.ovn.impl_idl import OvsdbappNbClient  # noqa: PLC0415

    stream = out if out is not None else sys.stdout
    try:
        api_client = load_api_client(config.kubeconfig, worker_threads=1)
    except KubeConfigError as e:
        stream.write(f"check: {e}\n")
        return EXIT_UNAVAILABLE
    try:
        kube = KubeClient(api_client)
        ssl: dict[str, Any] = {
            "ssl_private_key": config.ovn_nb_ssl_key or None,
            "ssl_certificate": config.ovn_nb_ssl_cert or None,
            "ssl_ca_cert": config.ovn_nb_ssl_ca or None,
        }
        try:
            nb = OvsdbappNbClient.from_addr(config.ovn_nb_addr, timeout=config.ovn_timeout, **ssl)
        except (OvnError, ValueError) as e:
            stream.write(f"check: cannot connect to the OVN Northbound database: {e}\n")
            return EXIT_UNAVAILABLE
        try:
            dataplane = (lambda: read_dataplane(config)) if config.dataplane else None
            return check(kube, nb, config, out=stream, strict=strict, dataplane=dataplane)
        finally:
            nb.close()
    finally:
        api_client.close()
