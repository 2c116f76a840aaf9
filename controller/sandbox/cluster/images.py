"""The real node's container images, written as OCI image archives without a registry or docker.

No image registry is reachable from the test bed, so the two images a real kubelet needs are
built here from Debian's statically linked busybox (`busybox-static`):

* `PAUSE_IMAGE`: the pod sandbox ("pause") image containerd's CRI plugin starts first in every
  pod; its process only has to live as long as the pod (`sleep infinity`).
* `BUSYBOX_IMAGE`: the workload image: `/bin/sh` and every busybox applet (`ping`, `ip`, `nc`,
  `sleep`, ...) as links to one static binary.

`write_oci_archive(path, ref, files, config)` writes one image as an OCI image-layout tar
(`oci-layout`, `index.json`, `blobs/sha256/...`: one uncompressed layer, the image config and the
manifest), named by the `io.containerd.image.name` annotation that `ctr images import` reads.
`build_images(directory)` writes both archives and returns their paths. Archives are
byte-for-byte reproducible (fixed mtimes and owners), so the same inputs give the same digests.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.sandbox.processes import SandboxError

PAUSE_IMAGE = "localhost/kube-ovn-sandbox/pause:1"
BUSYBOX_IMAGE = "localhost/kube-ovn-sandbox/busybox:1"
BUSYBOX_CANDIDATES = ("/bin/busybox", "/usr/bin/busybox")

_MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
_MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
_MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
_EPOCH = 0


@dataclass(frozen=True, slots=True)
class ImageFile:
    """One entry of an image layer: a regular file (`source`), a symlink (`link`) or a dir."""

    path: str
    source: Path | None = None
    link: str | None = None
    mode: int = 0o755


@dataclass(frozen=True, slots=True)
class ImageArchive:
    ref: str
    path: Path
    manifest_digest: str


def find_busybox() -> Path:
    """Debian's static busybox; raises `SandboxError` saying how to install it."""
    for candidate in BUSYBOX_CANDIDATES:
        path = Path(candidate)
        if path.is_file() and os.access(path, os.X_OK) and _is_static(path):
            return path
    raise SandboxError(
        "the real node's images need a statically linked busybox "
        f"(looked at {', '.join(BUSYBOX_CANDIDATES)}): apt-get install busybox-static"
    )


def _is_static(path: Path) -> bool:
    # A static ELF has no PT_INTERP program header; reading it avoids depending on `file`.
    with path.open("rb") as fh:
        head = fh.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:
            return False
        phoff = int.from_bytes(head[32:40], "little")
        phentsize = int.from_bytes(head[54:56], "little")
        phnum = int.from_bytes(head[56:58], "little")
        fh.seek(phoff)
        table = fh.read(phentsize * phnum)
    return all(
        int.from_bytes(table[i * phentsize : i * phentsize + 4], "little") != 3  # PT_INTERP
        for i in range(phnum)
    )


def busybox_applets(busybox: Path) -> list[str]:
    out = subprocess.run(
        [str(busybox), "--list"], capture_output=True, text=True, timeout=10, check=False
    )
    if out.returncode != 0:
        raise SandboxError(f"{busybox} --list failed: {out.stderr.strip()}")
    return sorted({a.strip() for a in out.stdout.split() if a.strip() and "/" not in a})


def _layer(files: Sequence[ImageFile]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for f in sorted(files, key=lambda f: f.path):
            info = tarfile.TarInfo(f.path.lstrip("/"))
            info.mtime = _EPOCH
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mode = f.mode
            if f.link is not None:
                info.type = tarfile.SYMTYPE
                info.linkname = f.link
                tar.addfile(info)
            elif f.source is not None:
                data = f.source.read_bytes()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
    return buf.getvalue()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _json(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def write_oci_archive(
    path: Path, ref: str, files: Sequence[ImageFile], config: Mapping[str, Any]
) -> ImageArchive:
    """Write the image `ref` (one layer of `files`, the OCI image `config`) to `path`."""
    layer = _layer(files)
    layer_digest = _digest(layer)
    image_config = _json(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": dict(config),
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        }
    )
    manifest = _json(
        {
            "schemaVersion": 2,
            "mediaType": _MEDIA_MANIFEST,
            "config": {
                "mediaType": _MEDIA_CONFIG,
                "digest": _digest(image_config),
                "size": len(image_config),
            },
            "layers": [{"mediaType": _MEDIA_LAYER, "digest": layer_digest, "size": len(layer)}],
        }
    )
    index = _json(
        {
            "schemaVersion": 2,
            "mediaType": _MEDIA_INDEX,
            "manifests": [
                {
                    "mediaType": _MEDIA_MANIFEST,
                    "digest": _digest(manifest),
                    "size": len(manifest),
                    "annotations": {
                        "io.containerd.image.name": ref,
                        "org.opencontainers.image.ref.name": ref.rsplit(":", 1)[-1],
                    },
                    "platform": {"architecture": "amd64", "os": "linux"},
                }
            ],
        }
    )
    entries: list[tuple[str, bytes]] = [
        ("oci-layout", _json({"imageLayoutVersion": "1.0.0"})),
        ("index.json", index),
    ]
    for blob in (layer, image_config, manifest):
        entries.append((f"blobs/sha256/{_digest(blob).split(':', 1)[1]}", blob))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, _EPOCH
            tar.addfile(info)
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, _EPOCH
            tar.addfile(info, io.BytesIO(data))
    tmp.replace(path)
    return ImageArchive(ref, path, _digest(manifest))


def _busybox_files(busybox: Path, applets: Sequence[str]) -> list[ImageFile]:
    files = [ImageFile(d) for d in ("bin", "tmp", "etc", "proc", "sys", "dev")]
    files.append(ImageFile("bin/busybox", source=busybox))
    files.extend(
        ImageFile(f"bin/{a}", link="busybox", mode=0o777) for a in applets if a != "busybox"
    )
    return files


def build_images(directory: Path, busybox: Path | None = None) -> dict[str, ImageArchive]:
    """Write the pause and busybox images into `directory`; {ref: archive}."""
    bb = busybox or find_busybox()
    if shutil.which("ctr") is None:
        raise SandboxError(
            "importing the images needs containerd's ctr (apt-get install containerd)"
        )
    pause = write_oci_archive(
        directory / "pause.oci.tar",
        PAUSE_IMAGE,
        _busybox_files(bb, ["sleep"]),
        {"Entrypoint": ["/bin/sleep", "infinity"], "WorkingDir": "/"},
    )
    workload = write_oci_archive(
        directory / "busybox.oci.tar",
        BUSYBOX_IMAGE,
        _busybox_files(bb, busybox_applets(bb)),
        {"Cmd": ["/bin/sh"], "Env": ["PATH=/bin"], "WorkingDir": "/"},
    )
    return {PAUSE_IMAGE: pause, BUSYBOX_IMAGE: workload}
