"""Writes a kubeconfig that points the official `kubernetes` client (and kubectl) at a server.

The file is JSON, which is valid YAML, so `kubernetes.config.load_kube_config(config_file=path)`
reads it unchanged. It names one cluster, one user with a bearer token (the emulator accepts any
token, or none) and one context, made current. For a TLS server (the real control plane,
cluster/controlplane.py) it also names the CA file, and the user may hold a client certificate and
key files instead of (or besides) a token.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

DEFAULT_CONTEXT = "emulator"
DEFAULT_TOKEN = "emulator-token"


def kubeconfig_dict(
    server_url: str,
    *,
    context: str = DEFAULT_CONTEXT,
    token: str | None = DEFAULT_TOKEN,
    namespace: str = "default",
    certificate_authority: str | os.PathLike[str] | None = None,
    client_certificate: str | os.PathLike[str] | None = None,
    client_key: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """The kubeconfig document for `server_url` (bearer token and/or client certificate)."""
    if not server_url.startswith(("http://", "https://")):
        raise ValueError(f"server URL must start with http:// or https://, got {server_url!r}")
    if (client_certificate is None) != (client_key is None):
        raise ValueError("a client certificate needs its key, and a key its certificate")
    cluster: dict[str, Any] = {"server": server_url}
    if certificate_authority is not None:
        cluster["certificate-authority"] = os.fspath(certificate_authority)
    user: dict[str, Any] = {}
    if token is not None:
        user["token"] = token
    if client_certificate is not None and client_key is not None:
        user["client-certificate"] = os.fspath(client_certificate)
        user["client-key"] = os.fspath(client_key)
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": context, "user": user}],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": context, "user": context, "namespace": namespace},
            }
        ],
        "current-context": context,
    }


def write_kubeconfig(
    path: str | os.PathLike[str],
    server_url: str,
    *,
    context: str = DEFAULT_CONTEXT,
    token: str | None = DEFAULT_TOKEN,
    namespace: str = "default",
    certificate_authority: str | os.PathLike[str] | None = None,
    client_certificate: str | os.PathLike[str] | None = None,
    client_key: str | os.PathLike[str] | None = None,
) -> Path:
    """Write the kubeconfig atomically (temp file + rename), mode 0600; returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    doc = kubeconfig_dict(
        server_url,
        context=context,
        token=token,
        namespace=namespace,
        certificate_authority=certificate_authority,
        client_certificate=client_certificate,
        client_key=client_key,
    )
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, target)
    return target
