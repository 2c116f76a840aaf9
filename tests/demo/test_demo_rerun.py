"""Running the demo again at once on the same metrics port works.

The first run's readiness probes and scrapes leave TIME-WAIT connections on the port for about a
minute; the controller's metrics server binds through them (SO_REUSEADDR), so the demo must not
refuse the port as "in use".
"""

from __future__ import annotations

import socket

import pytest

from controller.runtime.metrics import port_is_free
from tests.demo.conftest import StartDemo
from tests.demo.helpers import parse_rows
from tests.sandbox.test_demo_metrics_port import leave_time_wait, time_wait_on

pytestmark = pytest.mark.e2e


def test_second_run_right_after_the_first_reuses_the_metrics_port(start_demo: StartDemo) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    flags = ("--once", "--pods", "0", "--metrics-port", str(port), "--no-dataplane")
    first = start_demo(*flags)
    assert first.finish() == 0, first.output()
    if not time_wait_on(port):
        # The run's probes leave one only when the server closes first, which races with the
        # probing client's own close: leave one the way the server does.
        leave_time_wait(port)
    assert time_wait_on(port), "no TIME-WAIT connection on the port: nothing to prove"
    assert port_is_free("127.0.0.1", port)
    second = start_demo(*flags)
    assert second.finish() == 0, second.output()
    assert "in use" not in second.output()
    assert set(parse_rows(second.lines)) == {"demo/web-0", "demo/web-1", "demo/dual"}
