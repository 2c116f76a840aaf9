"""The fault proxy in front of the emulator: pass-through, injected answers, dropped watches,
refused connections, TLS on both sides, bounds and a clean stop."""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from controller.sandbox.apiserver.server import ApiServer
from controller.sandbox.cluster.faultproxy import FaultProxy, FaultProxyError
from tests.sandbox.helpers import pod


@pytest.fixture
def proxy(server: ApiServer) -> Iterator[FaultProxy]:
    with FaultProxy(server.host, server.port) as p:
        yield p


def _client(url: str, ca: Path | None = None) -> Any:
    config = client.Configuration(host=url)
    config.api_key = {"authorization": "Bearer sandbox"}
    if ca is not None:
        config.ssl_ca_cert = str(ca)
    return client.ApiClient(config)


@pytest.fixture
def core(proxy: FaultProxy) -> Iterator[Any]:
    api = _client(proxy.url)
    yield client.CoreV1Api(api)
    api.close()


def test_requests_pass_through(core: Any, server: ApiServer, proxy: FaultProxy) -> None:
    core.create_namespaced_pod("default", pod("p1"))
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["p1"]
    core.delete_namespaced_pod("p1", "default")
    assert server.store.list("pods", "default") == []
    assert [(r.method, r.injected) for r in proxy.requests] == [
        ("POST", None),
        ("GET", None),
        ("DELETE", None),
    ]


def test_injected_errors_answer_only_the_chosen_requests(core: Any, proxy: FaultProxy) -> None:
    proxy.fail_next(1, 429, method="POST", path=r"/pods$", retry_after=3)
    proxy.fail_next(2, 503, method="GET")
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("default", pod("p1"))
    assert exc.value.status == 429
    assert exc.value.headers["Retry-After"] == "3"
    assert '"reason": "TooManyRequests"' in exc.value.body
    for _ in range(2):
        with pytest.raises(ApiException) as exc:
            core.list_namespaced_pod("default")
        assert exc.value.status == 503
    assert proxy.pending_failures() == 0
    core.create_namespaced_pod("default", pod("p1"))
    assert len(core.list_namespaced_pod("default").items) == 1
    assert [r.injected for r in proxy.injected()] == [429, 503, 503]


def test_lost_answers_reach_the_server_and_never_the_client(
    core: Any, server: ApiServer, proxy: FaultProxy
) -> None:
    proxy.lose_answers(1, method="POST", path=r"/pods$")
    with pytest.raises(urllib3.exceptions.HTTPError):
        core.create_namespaced_pod("default", pod("p1"))
    # the server created it; only its answer was lost
    assert [p["metadata"]["name"] for p in server.store.list("pods", "default")] == ["p1"]
    assert [(r.method, r.answer_lost) for r in proxy.lost_answers()] == [("POST", True)]
    assert proxy.pending_failures() == 0
    # the rule is spent: the next write is answered
    core.create_namespaced_pod("default", pod("p2"))
    assert [r.answer_lost for r in proxy.requests] == [True, False]


def test_drop_watches_cuts_only_watches(core: Any, server: ApiServer, proxy: FaultProxy) -> None:
    core.create_namespaced_pod("default", pod("p1"))
    w = watch.Watch()
    stream = w.stream(core.list_namespaced_pod, "default", _request_timeout=(5, 10))
    assert next(stream)["type"] == "ADDED"
    assert server.store.wait_for_watchers("pods", 1)
    assert proxy.open_watches() == 1
    assert proxy.drop_watches() == 1
    with pytest.raises(Exception):  # noqa: B017 - any transport error ends the stream
        for _ in stream:
            pass
    # a plain request on its own connection is unaffected
    assert len(core.list_namespaced_pod("default").items) == 1


def test_refused_connections(core: Any, proxy: FaultProxy) -> None:
    proxy.refuse(True)
    proxy.drop_all()  # the pooled keep-alive connection goes too
    with pytest.raises(Exception):  # noqa: B017 - urllib3 retries, then gives up
        core.list_namespaced_pod("default", _request_timeout=(2, 2))
    proxy.refuse(False)
    assert core.list_namespaced_pod("default").items == []


def test_paused_proxy_refuses_at_tcp_level_then_resumes(core: Any, proxy: FaultProxy) -> None:
    port = proxy.port
    proxy.pause()
    proxy.drop_all()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2)
    proxy.resume()
    assert proxy.port == port
    assert core.list_namespaced_pod("default").items == []


def test_loopback_only_and_bounded(server: ApiServer) -> None:
    with pytest.raises(FaultProxyError, match="loopback"):
        FaultProxy(server.host, server.port, host="0.0.0.0")
    with pytest.raises(FaultProxyError, match="loopback"):
        FaultProxy("10.1.2.3", 443)
    with FaultProxy(server.host, server.port, max_connections=1) as p:
        first = socket.create_connection(("127.0.0.1", p.port))
        first.sendall(b"GET /api HTTP/1.1\r\nHost: x\r\n\r\n")
        assert first.recv(12).startswith(b"HTTP/1.")
        second = socket.create_connection(("127.0.0.1", p.port))
        second.settimeout(5)
        assert second.recv(1) == b""  # closed at once: one connection is the limit
        first.close()
        second.close()


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt"),
             "-subj", "/CN=test-ca", "-days", "1")  # fmt: skip
    _openssl("req", "-new", *ec, "-keyout", str(d / "server.key"), "-out", str(d / "server.csr"),
             "-subj", "/CN=127.0.0.1")  # fmt: skip
    (d / "ext").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", str(d / "server.csr"), "-CA", str(d / "ca.crt"),
             "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-out", str(d / "server.crt"),
             "-days", "1", "-extfile", str(d / "ext"))  # fmt: skip
    return d


def test_tls_on_both_sides(server: ApiServer, pki: Path) -> None:
    cert, key, ca = pki / "server.crt", pki / "server.key", pki / "ca.crt"
    # inner: TLS towards clients, plain HTTP to the emulator; outer: TLS on both sides
    with (
        FaultProxy(server.host, server.port, certfile=cert, keyfile=key) as inner,
        FaultProxy("127.0.0.1", inner.port, certfile=cert, keyfile=key, upstream_ca=ca) as outer,
    ):
        assert outer.url.startswith("https://")
        api = _client(outer.url, ca)
        core = client.CoreV1Api(api)
        core.create_namespaced_pod("default", pod("tls"))
        outer.fail_next(1, 500, method="GET")
        with pytest.raises(ApiException) as exc:
            core.read_namespaced_pod("tls", "default")
        assert exc.value.status == 500
        assert core.read_namespaced_pod("tls", "default").metadata.name == "tls"
        w = watch.Watch()
        stream = w.stream(core.list_namespaced_pod, "default", _request_timeout=(5, 10))
        assert next(stream)["object"].metadata.name == "tls"
        assert outer.drop_watches() == 1
        with pytest.raises(Exception):  # noqa: B017
            for _ in stream:
                pass
        api.close()
        # a client that does not trust the CA is refused by the TLS handshake
        untrusting = client.CoreV1Api(_client(outer.url))
        with pytest.raises(Exception):  # noqa: B017
            untrusting.list_namespaced_pod("default", _request_timeout=(2, 2))


def test_stop_joins_every_thread(server: ApiServer) -> None:
    before = set(threading.enumerate())
    p = FaultProxy(server.host, server.port).start()
    api = _client(p.url)
    client.CoreV1Api(api).list_namespaced_pod("default")
    p.stop()
    api.close()
    left = [t.name for t in set(threading.enumerate()) - before
            if t.is_alive() and t.name.startswith("faultproxy")]  # fmt: skip
    assert left == []
