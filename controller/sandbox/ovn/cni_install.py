"""Installs the `kube-ovn` CNI plugin stand-in for a container runtime, as kube-ovn v1.8.18's
`install-cni` init container does (dist/images/install.sh line 1945 runs /kube-ovn/install-cni.sh,
which copies the plugin and dist/images/01-kube-ovn.conflist onto the node).

* `install_plugin(bin_dir)` writes `<bin_dir>/kube-ovn`: an executable that runs
  `controller.sandbox.ovn.cni_plugin` with this interpreter (`python -I`, so no PYTHON*
  variable or user site of the runtime's environment matters) and this very `controller`
  package (loaded from its directory by path, so neither another install of the package nor
  the repository's other top-level directories can take its place). Replaced atomically: a
  runtime exec'ing the old file never sees half of the new one. With `loopback` (default) Debian's
  `loopback` plugin (containernetworking-plugins) is linked beside it when it is installed:
  containerd sets up every sandbox's `lo` with it.
* `write_conflist(conf_dir, server_socket)` writes `<conf_dir>/01-kube-ovn.conflist`
  (`cniVersion` 1.0.0, `name` kube-ovn, one plugin `{"type": "kube-ovn", "server_socket": ...}`;
  kube-ovn's own file adds `portmap`, which no test bed pod uses), atomically too. The runtime
  takes the first conflist of its conf dir in lexical order, so the directory should hold no
  other.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import controller

PLUGIN = "kube-ovn"
CONFLIST = "01-kube-ovn.conflist"
CNI_VERSION = "1.0.0"
LOOPBACK_CANDIDATES = (Path("/usr/lib/cni/loopback"), Path("/opt/cni/bin/loopback"))

_SCRIPT = '''#!{python} -I
"""The kube-ovn CNI plugin stand-in (written by controller.sandbox.ovn.cni_install)."""
import importlib.util
import sys

spec = importlib.util.spec_from_file_location(
    "controller", {init!r}, submodule_search_locations=[{package!r}]
)
module = importlib.util.module_from_spec(spec)
sys.modules["controller"] = module
spec.loader.exec_module(module)

from controller.sandbox.ovn.cni_plugin import main

sys.exit(main())
'''


def package_dir() -> Path:
    """This `controller` package's directory, as imported (a symlink is kept, not resolved)."""
    return Path(controller.__file__).parent.absolute()


def _write_atomically(path: Path, text: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def install_plugin(
    bin_dir: Path | str, *, python: str = sys.executable, loopback: bool = True
) -> Path:
    """Write the `kube-ovn` executable into `bin_dir`; returns its path."""
    bin_dir = Path(bin_dir)
    package = package_dir()
    script = _SCRIPT.format(python=python, init=str(package / "__init__.py"), package=str(package))
    target = bin_dir / PLUGIN
    _write_atomically(target, script, 0o755)
    if loopback:
        source = next((p for p in LOOPBACK_CANDIDATES if p.exists()), None)
        link = bin_dir / "loopback"
        if source is not None and source.parent != bin_dir and not link.exists():
            link.symlink_to(source)
    return target


def conflist(server_socket: str, *, name: str = PLUGIN, **plugin: Any) -> dict[str, Any]:
    """The network configuration list (extra `plugin` keys, e.g. `provider`, go into the
    kube-ovn entry)."""
    entry = {"type": PLUGIN, "server_socket": server_socket, **plugin}
    return {"cniVersion": CNI_VERSION, "name": name, "plugins": [entry]}


def write_conflist(
    conf_dir: Path | str, server_socket: Path | str, *, name: str = PLUGIN, **plugin: Any
) -> Path:
    """Write `01-kube-ovn.conflist` into `conf_dir`; returns its path."""
    path = Path(conf_dir) / CONFLIST
    body = conflist(str(server_socket), name=name, **plugin)
    _write_atomically(path, json.dumps(body, indent=2) + "\n", 0o644)
    return path
