"""Adapter pieces that need no API server: error mapping, config loading, transport failures."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from controller.apiclient import errors
from controller.apiclient.errors import error_from_response, transport_error
from controller.kube.client import IP, KubeClient, load_api_client


@pytest.mark.parametrize(
    ("status", "reason", "cls"),
    [
        (400, "BadRequest", errors.BadRequestError),
        (401, "Unauthorized", errors.UnauthorizedError),
        (403, "Forbidden", errors.ForbiddenError),
        (404, "NotFound", errors.NotFoundError),
        (409, "Conflict", errors.ConflictError),
        (409, "AlreadyExists", errors.AlreadyExistsError),
        (410, "Expired", errors.GoneError),
        (422, "Invalid", errors.InvalidError),
        (429, "TooManyRequests", errors.TooManyRequestsError),
        (500, "InternalError", errors.ServerError),
        (503, "ServiceUnavailable", errors.ServerError),
        (0, "ConnectionRefused", errors.KubeUnavailableError),
        (418, "Teapot", errors.KubeApiError),
    ],
)
def test_status_maps_to_one_error_class(
    status: int, reason: str, cls: type[errors.KubeApiError]
) -> None:
    err = errors.error_from_status(status, reason, "msg")
    assert type(err) is cls
    assert (err.status, err.status_reason, err.message) == (status, reason, "msg")
    assert str(err) == f"{status} {reason}: msg"


def test_retryable_flags() -> None:
    assert errors.error_from_status(409, "Conflict").retryable
    assert errors.error_from_status(503).retryable
    assert errors.error_from_status(0).retryable
    assert not errors.error_from_status(404).retryable
    assert not errors.error_from_status(422).retryable


def _kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        f"""
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}", insecure-skip-tls-verify: true}}}}]
users: [{{name: u, user: {{token: secret-token}}}}]
contexts: [{{name: ctx, context: {{cluster: c, user: u}}}}]
current-context: ctx
"""
    )
    return path


def test_load_api_client_sizes_the_pool_for_the_workers(tmp_path: Path) -> None:
    client = load_api_client(
        str(_kubeconfig(tmp_path, "https://127.0.0.1:6443")), worker_threads=64
    )
    try:
        cfg = client.configuration
        assert cfg.host == "https://127.0.0.1:6443"
        assert cfg.connection_pool_maxsize >= 68
        assert cfg.auth_settings()["BearerToken"]["value"] == "Bearer secret-token"
    finally:
        client.close()


def test_config_errors_are_clear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(errors.KubeConfigError, match="cannot load"):
        load_api_client(str(tmp_path / "missing"))
    (tmp_path / "garbage").write_text("::: not yaml [")
    with pytest.raises(errors.KubeConfigError):
        load_api_client(str(tmp_path / "garbage"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(errors.KubeConfigError, match="in-cluster"):
        load_api_client("")
    with pytest.raises(ValueError):
        load_api_client("x", worker_threads=0)


def test_unreachable_server_is_kube_unavailable_and_observed(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on once this closes
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    api_client = load_api_client(str(_kubeconfig(tmp_path, f"http://127.0.0.1:{port}")))
    api_client.configuration.retries = 0
    seen: list[tuple[str, str, str, float]] = []
    kube = KubeClient(api_client, on_request=lambda *a: seen.append(a), timeout=(1.0, 1.0))
    try:
        api_client.rest_client = type(api_client.rest_client)(api_client.configuration)
        with pytest.raises(errors.KubeUnavailableError) as info:
            kube.get_ip("p1.default")
    finally:
        api_client.close()
    assert info.value.status == 0 and info.value.retryable
    ((verb, url, code, seconds),) = seen
    assert (verb, url, code) == ("GET", IP, "<error>")
    assert seconds >= 0


def test_names_are_validated_before_any_request(tmp_path: Path) -> None:
    api_client = load_api_client(str(_kubeconfig(tmp_path, "http://127.0.0.1:1")))
    kube = KubeClient(api_client)
    try:
        with pytest.raises(ValueError, match="name"):
            kube.get_statefulset("default", "a/b")
        with pytest.raises(ValueError, match="namespace"):
            kube.get_configmap("", "cm")
    finally:
        api_client.close()


def test_error_bodies_status_or_not() -> None:
    status_body = (
        b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"AlreadyExists",'
        b'"message":"ips.kubeovn.io \\"a\\" already exists","code":409}'
    )
    err = error_from_response(409, status_body)
    assert type(err) is errors.AlreadyExistsError
    assert err.message == 'ips.kubeovn.io "a" already exists'

    # An API group that is not installed (kubevirt) answers a plain-text 404.
    missing = error_from_response(404, b"404 page not found\n")
    assert type(missing) is errors.NotFoundError
    assert missing.message.startswith("404 page not found")

    assert type(error_from_response(502, b"<html>bad gateway</html>")) is errors.ServerError
    assert type(error_from_response(500, None)) is errors.ServerError


def test_a_static_token_is_not_refreshed_before_every_request(tmp_path: Path) -> None:
    client = load_api_client(str(_kubeconfig(tmp_path, "https://127.0.0.1:6443")))
    try:
        cfg = client.configuration
        # the library's hook would re-apply the kubeconfig on every request for nothing
        assert cfg.refresh_api_key_hook is None
        for _ in range(2):
            assert cfg.auth_settings()["BearerToken"]["value"] == "Bearer secret-token"
        assert cfg.host == "https://127.0.0.1:6443"
    finally:
        client.close()


def _exec_kubeconfig(tmp_path: Path, expires_in_seconds: int) -> Path:
    """A kubeconfig whose user's token comes from an exec plugin that numbers its tokens."""
    counter = tmp_path / "issued"
    counter.write_text("0")
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        f"""
import datetime, json, pathlib
counter = pathlib.Path({str(counter)!r})
n = int(counter.read_text()) + 1
counter.write_text(str(n))
expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(
    seconds={expires_in_seconds})
print(json.dumps({{
    "apiVersion": "client.authentication.k8s.io/v1beta1",
    "kind": "ExecCredential",
    "status": {{"token": f"token-{{n}}",
               "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}},
}}))
"""
    )
    path = tmp_path / "kubeconfig"
    path.write_text(
        f"""
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:6443"}}}}]
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: {json.dumps(sys.executable)}
      args: [{json.dumps(str(plugin))}]
      interactiveMode: Never
contexts: [{{name: ctx, context: {{cluster: c, user: u}}}}]
current-context: ctx
"""
    )
    return path


def test_an_expiring_exec_token_is_refreshed(tmp_path: Path) -> None:
    # NOTE: the library treats a token as expired a few minutes before its expiry, so one that
    # expires in a minute is renewed before the next request.
    client = load_api_client(str(_exec_kubeconfig(tmp_path, expires_in_seconds=60)))
    try:
        cfg = client.configuration
        assert cfg.auth_settings()["BearerToken"]["value"] == "Bearer token-2"
        assert cfg.auth_settings()["BearerToken"]["value"] == "Bearer token-3"
    finally:
        client.close()


def test_a_long_lived_exec_token_is_kept(tmp_path: Path) -> None:
    client = load_api_client(str(_exec_kubeconfig(tmp_path, expires_in_seconds=3600)))
    try:
        cfg = client.configuration
        for _ in range(2):
            assert cfg.auth_settings()["BearerToken"]["value"] == "Bearer token-1"
    finally:
        client.close()


def test_transport_errors_are_kube_unavailable_and_say_whether_refused() -> None:
    refused = transport_error(ConnectionRefusedError(111, "Connection refused"))
    assert type(refused) is errors.KubeUnavailableError
    assert (refused.status, refused.refused, refused.retryable) == (0, True, True)
    reset = transport_error(ConnectionResetError(104, "Connection reset by peer"))
    assert (reset.status, reset.status_reason, reset.refused) == (0, "ConnectionResetError", False)
