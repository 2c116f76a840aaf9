"""What the demo prints: the table of pods as they come up (marking each Running as a kubelet
would, wired into the data plane first when there is one) and the connectivity matrix.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from controller.core.constants import LOGICAL_SWITCH_ANNOTATION, ROUTED_ANNOTATION
from controller.core.naming import pod_name_to_port_name
from controller.core.subnet_conditions import is_ready
from controller.ovn.api import NbClient
from controller.sandbox.apiserver.resources import ApiError
from controller.sandbox.apiserver.selectors import build_selector
from controller.sandbox.cluster.wiring import WiringError
from controller.sandbox.demo import matrix
from controller.sandbox.demo.matrix import MatrixPod
from controller.sandbox.demo.objects import DEMO_NAMESPACE, NODES, kubelet_status
from controller.sandbox.demo.session import DemoApi, Session
from controller.sandbox.demo.supervision import POLL, ControllerProcess, DemoError, log_tail
from controller.sandbox.demo.table import COLUMNS, column_widths, format_line, format_row, pod_row
from controller.sandbox.ovn.cni import CniWiring, plan_node, plan_pod


def _subnet_ready(subnet: Any) -> bool:
    return is_ready((subnet or {}).get("status"))


def show_matrix(
    session: Session,
    server: DemoApi,
    wiring: CniWiring,
    pods: Sequence[tuple[str, str]],
    controller: ControllerProcess | None = None,
) -> None:
    rows = []
    switches: set[str] = set()
    for ns, name in sorted(pods):
        pod = server.store.get("pods", ns, name)
        plan = plan_pod(pod)[0]
        annotations = pod["metadata"].get("annotations") or {}
        switches.add(str(annotations.get(LOGICAL_SWITCH_ANNOTATION) or ""))
        rows.append(
            MatrixPod(
                f"{ns}/{name}",
                wiring.pod_netns(pod),
                plan.ips.split(",")[0],
                next((g for g in plan.gateways if g), ""),
            )
        )
    # The nodes route a subnet on ovn0 once it is Ready, as kube-ovn's CNI daemon does.
    for switch in sorted(s for s in switches if s):
        if controller is not None:
            session.wait_store(server, controller, "subnets", None, switch, _subnet_ready, "Ready")
    wiring.set_subnets(server.store.list("subnets", None))
    for node_name, _ in NODES:
        node = server.store.get("nodes", None, node_name)
        rows.append(
            MatrixPod(
                f"node/{node_name}",
                wiring.node_netns(node_name),
                plan_node(node).ips.split(",")[0],
                "",
            )
        )
    results = matrix.measure(lambda netns, ip: wiring.dp.ping(netns, ip, wait=1.0), rows)
    session.say(
        "\nconnectivity: one ping from each pod or node (row) to each pod and node (column) "
        "and to its gateway; ✓ round-trip ms, ✗ no answer within 1 s"
    )
    for line in matrix.format_matrix(rows, results):
        session.say(line)
    session.say(matrix.summary(results))


def show_pods(
    session: Session,
    server: DemoApi,
    nb: NbClient,
    controller: ControllerProcess,
    pods: Sequence[tuple[str, str]],
    wiring: CniWiring | None = None,
) -> bool:
    """Print a row per pod as it comes up; True when all are up in time."""
    store = server.store
    node_ips = dict(NODES)
    widths = column_widths([name for _, name in pods])
    pending = {f"{ns}/{name}" for ns, name in pods}
    created = time.monotonic()
    session.say("")
    session.say(format_line(COLUMNS, widths))
    watcher = store.watch("pods", build_selector(DEMO_NAMESPACE, None, None, ()), None)
    deadline = created + session.options.timeout
    try:
        while pending:
            for ns, name in pods:
                key = f"{ns}/{name}"
                if key not in pending:
                    continue
                try:
                    pod = store.get("pods", ns, name)
                except ApiError:
                    continue
                status = kubelet_status(pod, node_ips)
                if status is not None and (pod.get("status") or {}).get("podIP") is None:
                    if wiring is not None:
                        # as kube-ovn's CNI: wired once routed, Running once bound
                        if (pod["metadata"].get("annotations") or {}).get(
                            ROUTED_ANNOTATION
                        ) != "true":
                            continue
                        try:
                            wiring.wire(pod)
                        except WiringError as exc:
                            raise DemoError(f"data plane: {exc}") from exc
                    store.patch("pods", ns, name, {"status": status}, subresource="status")
                port = nb.get_port(pod_name_to_port_name(name, ns))
                row = pod_row(
                    pod, None if port is None else port.switch, time.monotonic() - created
                )
                if row is not None:
                    pending.discard(key)
                    session.say(format_row(row, widths))
            if not pending:
                break
            session.check_alive(controller)
            if time.monotonic() > deadline:
                session.say(
                    f"not up after {session.options.timeout}s: {', '.join(sorted(pending))}"
                    f"\n{log_tail(controller.log_path)}"
                )
                return False
            # Woken by any pod write; the timeout bounds how late we see a signal or an NB
            # port that lands without a pod write after it.
            watcher.next(POLL)
            session.check_stop()
    finally:
        watcher.close()
    session.say(f"\nall {len(pods)} pods are up")
    return True
