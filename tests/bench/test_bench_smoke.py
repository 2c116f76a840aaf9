"""Smoke run of bench/e2e --quick: it must finish, and print positive figures for every part.

No timing assertion (figures depend on the machine); only that each measurement produced one.
"""

from __future__ import annotations

import re

import pytest

from tests.bench.helpers import run_bench

pytestmark = pytest.mark.timeout(240)


def _row(out: str, label: str) -> list[float]:
    m = re.search(rf"^{re.escape(label)}\s+(.*)$", out, re.MULTILINE)
    assert m, f"no {label!r} row in:\n{out}"
    return [float(x) for x in re.findall(r"\d+(?:\.\d+)?", m.group(1))]


def test_quick_run_prints_figures_limits_and_startup() -> None:
    proc = run_bench("bench/e2e", "--quick", timeout=200)
    out = proc.stdout
    for label in ("pods/s to allocated", "pods/s to routed"):
        controller, emulator_limit, ovn_limit, *ratios = _row(out, label)
        assert min(controller, emulator_limit, ovn_limit) > 0
        assert len(ratios) == 2
    assert _row(out, "controller CPU ms/pod")[0] > 0
    assert _row(out, "controller CPU / server CPU")[0] > 0
    # the limits' own clients, and the bare libraries' floor, each with the controller's ratio
    api_replay, ovn_replay = _row(out, "replay client CPU ms/pod")
    assert min(api_replay, ovn_replay) > 0
    floor = re.search(
        r"^bare libraries, one thread, (\d+) pods: urllib3 POST ip \+ PATCH pod ([\d.]+) ms/pod, "
        r"ovsdbapp one transaction ([\d.]+) ms/pod, sum ([\d.]+) \(controller / that: [\d.]+\)$",
        out,
        re.MULTILINE,
    )
    assert floor, out
    assert int(floor.group(1)) == 200
    assert float(floor.group(4)) == pytest.approx(
        float(floor.group(2)) + float(floor.group(3)), abs=0.011
    )
    assert "POST ips 201" in out  # the controller's per-pod requests were counted
    assert re.search(r"start-up with 2000 existing pods", out)
    ready = re.search(r"spawn to /readyz 200: ([\d.]+)s", out)
    assert ready and float(ready.group(1)) > 0
    assert "IPAM rebuild (its log)" in out
