"""One HTTP request to the Kubernetes API server through an `ApiClient`, without model classes.

Contract:

* `send(api_client, method, path, ...)` serialises the request with the client's configuration
  (host, bearer token, TLS), sends it with the given (connect, read) timeout and returns the raw,
  unread urllib3 response of a 2xx answer: the caller reads or streams it and releases it.
* `read_all(raw)` reads the whole body of such a response and releases it; `read_object(raw)`
  also decodes it as one JSON object (an empty body is `{}`).
* Every failure is a `controller.apiclient.errors.KubeApiError`: a non-2xx answer by its status
  and `Status` body (`error_from_response`), a failure to reach the server or to read the answer
  as `KubeUnavailableError` (status 0), an answer that is not a JSON object as a `KubeApiError`
  with status reason `BadResponse`.

Bodies are plain dicts (or JSON already encoded as bytes): the generated API classes' argument
validation and model (de)serialisation cost more than the request itself
(kubernetes-client/python#1867), and `param_serialize` would walk dicts through
`sanitize_for_serialization`, pure overhead for them.

The hot path skips the generic layers too: per `ApiClient`, the headers `param_serialize`
produces (User-Agent, default headers, the bearer token) and the parsed host are resolved once,
and each request goes straight to the connection pool of the client's own `rest_client` pool
manager (`urlopen` with the body as compact JSON bytes), skipping the per-request URL parsing,
header sanitising and content-type matching of `rest_client.request` while keeping its pool
(TLS, keep-alive connections, retries). A client whose credentials refresh
(`refresh_api_key_hook`: the in-cluster service-account token, which the kubelet rotates, and
kubeconfig exec plugins) has its headers resolved again, through the hook, at most every
`CREDENTIAL_RECHECK_SECONDS` and after every 401 answer. Clients that carry a cookie or go
through a proxy keep the generic path through `call_api`.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import urllib3
from kubernetes.client import ApiException

from controller.apiclient.errors import (
    KubeApiError,
    error_from_response,
    error_from_status,
    transport_error,
)
from controller.queues.clock import REAL_CLOCK, Clock

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"

#: A urllib3 timeout as `call_api` takes it: total seconds, or (connect, read); None: none.
Timeout = float | tuple[float, float | None] | None


#: How long the resolved headers of a client with a credential refresh hook are reused. The
#: in-cluster loader re-reads its token file only once a minute, and a token the kubelet
#: rotates stays valid well past its successor's arrival; an expired one answers 401, after
#: which the next request resolves again at once.
CREDENTIAL_RECHECK_SECONDS = 1.0

#: The monotonic clock of the header re-check (a module setting: the cache is module-wide).
CLOCK: Clock = REAL_CLOCK


@dataclass(frozen=True)
class _Direct:
    """What every request of one ApiClient shares on the direct path."""

    scheme: str
    host: str
    port: int | None
    base_path: str  # the server URL's own path prefix, if any ("" usually)
    headers: dict[str, str]  # Accept, User-Agent, default headers, Authorization
    recheck_at: float = math.inf  # when to resolve the headers again (monotonic clock)


_DIRECT: weakref.WeakKeyDictionary[Any, _Direct | None] = weakref.WeakKeyDictionary()
_DIRECT_LOCK = threading.Lock()
_TIMEOUTS: dict[Any, urllib3.Timeout | None] = {}


def _direct(api_client: Any) -> _Direct | None:
    """The shared request parts of `api_client`, or None when it needs the generic path."""
    cfg = api_client.configuration
    if (
        getattr(api_client, "cookie", None)
        or type(api_client.rest_client.pool_manager) is not urllib3.PoolManager
    ):
        return None
    try:
        cached = _DIRECT[api_client]
        if cached is None or CLOCK.now() < cached.recheck_at:
            return cached
    except (KeyError, TypeError):
        pass
    refreshes = getattr(cfg, "refresh_api_key_hook", None) is not None
    # param_serialize runs the refresh hook (it may read a new token) while adding the auth
    _, url, headers, _, _ = api_client.param_serialize(
        "GET", "", header_params={"Accept": JSON}, auth_settings=["BearerToken"]
    )
    parsed = urllib3.util.parse_url(url)
    direct: _Direct | None = None
    if parsed.scheme in ("http", "https") and parsed.host and not parsed.query:
        direct = _Direct(
            parsed.scheme,
            parsed.host,
            parsed.port,
            (parsed.path or "").rstrip("/"),
            {str(k): str(v) for k, v in headers.items()},
            CLOCK.now() + CREDENTIAL_RECHECK_SECONDS if refreshes else math.inf,
        )
    # An ApiClient that is not weak-referenceable is resolved on every request.
    with _DIRECT_LOCK, contextlib.suppress(TypeError):
        _DIRECT[api_client] = direct
    return direct


def _timeout(timeout: Timeout) -> urllib3.Timeout | None:
    """`rest_client.request`'s mapping of a timeout, memoised (a handful of distinct values)."""
    try:
        return _TIMEOUTS[timeout]
    except KeyError:
        pass
    made: urllib3.Timeout | None = None
    if isinstance(timeout, int | float) and timeout:
        made = urllib3.Timeout(total=timeout)
    elif isinstance(timeout, tuple) and len(timeout) == 2:
        made = urllib3.Timeout(connect=timeout[0], read=timeout[1])
    if len(_TIMEOUTS) < 64:
        _TIMEOUTS[timeout] = made
    return made


def _encode(body: Any) -> bytes:
    if isinstance(body, bytes):
        return body
    return json.dumps(body, separators=(",", ":")).encode()


def send(
    api_client: Any,
    method: str,
    path: str,
    *,
    query: Iterable[tuple[str, str]] = (),
    body: Any = None,
    content_type: str = JSON,
    timeout: Timeout = None,
) -> Any:
    """Send one request; return the unread urllib3 response of a 2xx answer (see module doc).

    `body` is a JSON-serialisable value, or JSON already encoded as bytes.
    """
    direct = _direct(api_client)
    if direct is not None:
        return _send_direct(
            api_client, direct, method, path, list(query), body, content_type, timeout
        )
    if isinstance(body, bytes):
        body = json.loads(body)  # the generic path serialises it again itself
    headers = {"Accept": JSON}
    if body is not None:
        headers["Content-Type"] = content_type
    _, url, headers, _, _ = api_client.param_serialize(
        method,
        path,
        query_params=list(query) or None,
        header_params=headers,
        auth_settings=["BearerToken"],
    )
    try:
        response = api_client.call_api(
            method, url, header_params=headers, body=body, _request_timeout=timeout
        )
    except ApiException as exc:  # raised for TLS failures (status 0) and the like
        raise _from_api_exception(exc) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise transport_error(exc) from exc
    raw = response.response
    if not 200 <= response.status <= 299:
        raise error_from_response(response.status, read_all(raw))
    return raw


def _send_direct(
    api_client: Any,
    direct: _Direct,
    method: str,
    path: str,
    query: list[tuple[str, str]],
    body: Any,
    content_type: str,
    timeout: Timeout,
) -> Any:
    headers = dict(direct.headers)  # urllib3 may add to it
    payload = None
    if body is not None:
        headers["Content-Type"] = content_type
        payload = _encode(body)
    url = direct.base_path + path
    if query:
        url += "?" + urlencode(query)
    try:
        pool = api_client.rest_client.pool_manager.connection_from_host(
            direct.host, direct.port, direct.scheme
        )
        raw = pool.urlopen(
            method,
            url,
            body=payload,
            headers=headers,
            timeout=_timeout(timeout),
            preload_content=False,
            redirect=False,
            assert_same_host=False,
        )
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise transport_error(exc) from exc
    if not 200 <= raw.status <= 299:
        if raw.status == 401 and direct.recheck_at != math.inf:
            # the credentials may have rotated: the next request asks the hook again
            with _DIRECT_LOCK, contextlib.suppress(KeyError, TypeError):
                del _DIRECT[api_client]
        raise error_from_response(raw.status, read_all(raw))
    return raw


def read_all(raw: Any) -> bytes:
    """The whole body of a response from `send`, which is then released to the pool."""
    try:
        data: bytes = raw.data
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise transport_error(exc) from exc
    finally:
        raw.release_conn()
    return data


def read_object(raw: Any) -> dict[str, Any]:
    """`read_all`, decoded as one JSON object (an empty body is `{}`); else `BadResponse`."""
    status = raw.status
    data = read_all(raw)
    if not data:
        return {}
    try:
        decoded = json.loads(data)
    except ValueError as exc:
        raise KubeApiError(status, "BadResponse", f"undecodable JSON: {exc}") from exc
    if not isinstance(decoded, dict):
        raise KubeApiError(status, "BadResponse", "response is not a JSON object")
    return decoded


def _from_api_exception(exc: ApiException) -> KubeApiError:
    status = int(exc.status or 0)
    body = exc.body
    if status and body:
        raw = body.encode() if isinstance(body, str) else body
        return error_from_response(status, raw)
    return error_from_status(status, str(exc.reason or ""), "")
