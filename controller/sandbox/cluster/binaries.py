"""Where the real control plane's binaries are: the pinned versions, the build cache, the lookup.

`find_binaries()` returns the directory holding etcd, kube-apiserver, kube-controller-manager and
kube-scheduler (`$KUBE_OVN_CONTROL_PLANE_BIN`, else the cache `.ci/build-control-plane` fills) or
raises `BinariesMissing` naming what is absent and how to build it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from controller.sandbox.processes import SandboxError

REPO_ROOT = Path(__file__).resolve().parents[3]
GO_MODULE_DIR = REPO_ROOT / "hack" / "control-plane"
ENV_BIN = "KUBE_OVN_CONTROL_PLANE_BIN"
ENV_CACHE = "KUBE_OVN_CONTROL_PLANE_CACHE"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")


class BinariesMissing(SandboxError):
    """The control-plane binaries are not built (or not where they were looked for)."""


# --------------------------------------------------------------------------- binaries


@dataclass(frozen=True, slots=True)
class Binaries:
    """The directory holding etcd, kube-apiserver, kube-controller-manager, kube-scheduler."""

    dir: Path

    def path(self, name: str) -> Path:
        return self.dir / name


def _pinned(go_mod: Path, module: str) -> str:
    try:
        text = go_mod.read_text(encoding="utf-8")
    except OSError as e:
        raise BinariesMissing(f"cannot read the pinned versions in {go_mod}: {e}") from e
    m = re.search(rf"^(?:require)?\s*{re.escape(module)} (v\S+)", text, re.M)
    if m is None:
        raise BinariesMissing(f"{go_mod} does not require {module}")
    return m.group(1)


def pinned_versions() -> tuple[str, str]:
    """(Kubernetes version, etcd version) pinned by the wrapper modules in hack/control-plane."""
    return (
        _pinned(GO_MODULE_DIR / "go.mod", "k8s.io/kubernetes"),
        _pinned(GO_MODULE_DIR / "etcd" / "go.mod", "go.etcd.io/etcd/server/v3"),
    )


def cache_dir(env: Mapping[str, str] = os.environ) -> Path:
    if env.get(ENV_CACHE):
        return Path(env[ENV_CACHE])
    base = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "kube-ovn-pod-controller" / "control-plane"


def find_binaries(env: Mapping[str, str] = os.environ) -> Binaries:
    """Where the binaries are (see the module docstring); raises `BinariesMissing`."""
    if env.get(ENV_BIN):
        where = Path(env[ENV_BIN])
        how = f"${ENV_BIN}={where}"
    else:
        k8s, etcd = pinned_versions()
        top = cache_dir(env) / f"k8s-{k8s}-etcd-{etcd}"
        where = top / "bin"
        how = f"the build cache {where}"
        if not (top / "stamp").is_file():
            raise BinariesMissing(
                f"the control plane (k8s {k8s}, etcd {etcd}) is not built in {top} "
                f"(no stamp file): run `bash .ci/build-control-plane`, or set ${ENV_BIN}"
            )
    missing = [b for b in BINARIES if not os.access(where / b, os.X_OK)]
    if missing:
        raise BinariesMissing(
            f"{how} lacks {', '.join(missing)}: run `bash .ci/build-control-plane`"
        )
    return Binaries(where)
