"""The demo's free-port probe agrees with the metrics server's own bind.

Re-running the demo soon after a run leaves TIME-WAIT connections on the metrics port (the
server closed its side of the scrapes and probes). The controller's `MetricsServer` binds with
SO_REUSEADDR (http.server's default), so the port is usable; the probe must not call it "in use".
"""

from __future__ import annotations

import socket
from pathlib import Path

from prometheus_client import CollectorRegistry

from controller.runtime.metrics import MetricsServer
from controller.sandbox.demo.supervision import metrics_port_is_free
from controller.testing.wait import wait_for

TIME_WAIT = "06"  # the state column of /proc/net/tcp


def time_wait_on(port: int) -> bool:
    """Whether a TIME-WAIT connection has 127.0.0.1:`port` as its local end."""
    lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    for line in lines:
        fields = line.split()
        local, state = fields[1], fields[3]
        if state == TIME_WAIT and int(local.split(":")[1], 16) == port:
            return True
    return False


def leave_time_wait(port: int = 0) -> int:
    """The port (`port`, or a free one) of a stopped `MetricsServer` whose last probe
    connection sits in TIME-WAIT.

    As a demo run leaves it: the server answered a readiness probe and closed its side first
    (HTTP/1.0), then stopped; nothing listens on the port any more.
    """
    server = MetricsServer(CollectorRegistry(), port, host="127.0.0.1")
    server.start()
    port = server.port
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            client.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
            answer = b""
            while chunk := client.recv(4096):  # until the server has closed its side
                answer += chunk
        assert answer.startswith(b"HTTP/1.0 200"), answer
    finally:
        server.stop()
    wait_for(lambda: time_wait_on(port), message=f"a TIME-WAIT connection on port {port}")
    return port


def test_port_with_only_time_wait_connections_is_free_for_the_demo_and_the_server() -> None:
    port = leave_time_wait()
    # the state a bind without SO_REUSEADDR trips on: it is refused
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as plain:
        try:
            plain.bind(("127.0.0.1", port))
        except OSError:
            pass
        else:
            raise AssertionError("no TIME-WAIT effect on a plain bind: the test proves nothing")
    assert metrics_port_is_free(port)
    server = MetricsServer(CollectorRegistry(), port, host="127.0.0.1")
    server.start()
    try:
        assert server.port == port
    finally:
        server.stop()


def test_port_with_a_listener_is_still_in_use() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        assert not metrics_port_is_free(busy.getsockname()[1])
