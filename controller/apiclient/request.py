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

Bodies are plain dicts handed straight to `call_api`: `param_serialize` would walk them through
`sanitize_for_serialization`, pure overhead for dicts, and the generated API classes' argument
validation and model (de)serialisation cost more than the request itself
(kubernetes-client/python#1867).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import urllib3
from kubernetes.client import ApiException

from controller.apiclient.errors import (
    KubeApiError,
    error_from_response,
    error_from_status,
    transport_error,
)

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"

#: A urllib3 timeout as `call_api` takes it: total seconds, or (connect, read); None: none.
Timeout = float | tuple[float, float | None] | None


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
    """Send one request; return the unread urllib3 response of a 2xx answer (see module doc)."""
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
