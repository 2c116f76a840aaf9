"""Writes a kubeconfig that points the official `kubernetes` client (and kubectl) at a server.

The file is JSON, which is valid YAML, so `kubernetes.config.load_kube_config(config_file=path)`
reads it unchanged. It names one cluster, one user with a bearer token (the emulator accepts any
token, or none) and one context, made current.
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
    token: str = DEFAULT_TOKEN,
    namespace: str = "default",
) -> dict[str, Any]:
    """The kubeconfig document for `server_url` (plain http, bearer token)."""
    if not server_url.startswith(("http://", "https://")):
        raise ValueError(f"server URL must start with http:// or https://, got {server_url!r}")
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": context, "cluster": {"server": server_url}}],
        "users": [{"name": context, "user": {"token": token}}],
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
    token: str = DEFAULT_TOKEN,
    namespace: str = "default",
) -> Path:
    """Write the kubeconfig atomically (temp file + rename), mode 0600; returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    doc = kubeconfig_dict(server_url, context=context, token=token, namespace=namespace)
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, target)
    return target
