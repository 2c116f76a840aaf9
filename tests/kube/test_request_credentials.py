"""The direct request path with credentials that refresh (the in-cluster service-account token).

A local HTTP server records the Authorization header of each request and answers 401 to a token
it was told to refuse; the client's refresh hook hands out whatever token the test set.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from controller.apiclient import request as rq
from controller.apiclient.errors import KubeApiError
from controller.testing.clock import FakeClock


class _Server(http.server.ThreadingHTTPServer):
    seen: list[str]
    refused: set[str]


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        token = self.headers.get("Authorization", "")
        self.server.seen.append(token)
        body = b"{}" if token not in self.server.refused else b'{"kind":"Status","code":401}'
        self.send_response(401 if token in self.server.refused else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.seen, srv.refused = [], set()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock(start=100.0)
    monkeypatch.setattr(rq, "CLOCK", fake)
    return fake


def _client(server: _Server, token: list[str]) -> Any:
    cfg = k8s.Configuration(host=f"http://127.0.0.1:{server.server_address[1]}")

    def refresh(c: Any) -> None:  # what the in-cluster loader's hook does with its token file
        c.api_key["BearerToken"] = f"Bearer {token[0]}"

    cfg.refresh_api_key_hook = refresh
    cfg.api_key = {"BearerToken": f"Bearer {token[0]}"}
    return k8s.ApiClient(cfg)


def _get(api: Any) -> None:
    rq.read_all(rq.send(api, "GET", "/api/v1/namespaces"))


def test_a_refreshing_client_takes_the_direct_path_and_sees_a_rotated_token(
    server: _Server, clock: FakeClock
) -> None:
    token = ["one"]
    api = _client(server, token)
    try:
        assert rq._direct(api) is not None
        _get(api)
        token[0] = "two"
        _get(api)  # within the recheck interval: the resolved headers are reused
        clock.step(rq.CREDENTIAL_RECHECK_SECONDS)
        _get(api)
        assert server.seen == ["Bearer one", "Bearer one", "Bearer two"]
    finally:
        api.close()


def test_a_401_makes_the_next_request_ask_the_hook_again(server: _Server, clock: FakeClock) -> None:
    token = ["one"]
    api = _client(server, token)
    try:
        _get(api)
        server.refused.add("Bearer one")
        token[0] = "two"
        with pytest.raises(KubeApiError) as err:
            _get(api)
        assert err.value.status == 401
        _get(api)  # no clock advance: the 401 alone dropped the resolved headers
        assert server.seen == ["Bearer one", "Bearer one", "Bearer two"]
    finally:
        api.close()
