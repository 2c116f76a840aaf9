"""The project's own `check` passes on the cluster the demo builds.

The demo's dual-stack pod sits on a distributed-gateway subnet while the join subnet (the nodes'
addresses) is IPv4 only. kube-ovn then routes only the pod's IPv4 address through its node (a
src-ip route needs a node address of the same family) and marks the pod routed; the demo prints
it as routed, and `check` must agree instead of reporting its IPv6 address `route-missing`.
"""

from __future__ import annotations

import io
import re

import pytest

from controller.audit.check import EXIT_CLEAN, run_check
from controller.config import Config
from tests.demo.conftest import StartDemo
from tests.demo.helpers import SERVING_LINE, parse_rows

pytestmark = pytest.mark.e2e

FLAGS = ("--metrics-port", "0", "--timeout", "60", "--no-dataplane")
NB_REMOTE = re.compile(r"^NB ovsdb-server ready at (\S+) \(pid \d+\)")
KUBECONFIG = re.compile(r"^API server emulator at \S+ \(kubeconfig (\S+)\)")


def test_check_is_clean_on_the_demo_cluster_with_its_dual_stack_pod(
    start_demo: StartDemo,
) -> None:
    run = start_demo("--pods", "1", *FLAGS)
    run.wait_line(SERVING_LINE)
    nb = run.first(NB_REMOTE)
    kubeconfig = run.first(KUBECONFIG)
    assert nb is not None and kubeconfig is not None, run.output()
    dual = parse_rows(run.lines)["demo/dual"]
    assert len(dual.ips) == 2 and dual.routed == "yes", run.output()

    cfg = Config(
        command="check",
        kubeconfig=kubeconfig.group(1),
        ovn_nb_addr=nb.group(1),
        ovn_timeout=5,
    )
    out = io.StringIO()
    code = run_check(cfg, out=out, strict=True)
    run.interrupt()
    assert run.finish() == 0, run.output()
    assert code == EXIT_CLEAN, out.getvalue()
    assert out.getvalue().startswith("cluster audit: OK"), out.getvalue()
