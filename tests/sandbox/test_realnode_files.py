"""What the real-node launcher writes, checked without starting anything: the OCI image archives
(`cluster/images.py`) a containerd imports, and containerd's configuration per node
(`cluster/realnode.py`), parsed back as TOML."""

from __future__ import annotations

import hashlib
import json
import tarfile
import tomllib
from pathlib import Path
from typing import Any

from controller.sandbox.cluster.images import ImageFile, write_oci_archive
from controller.sandbox.cluster.nodeconfig import containerd_config, loopback_conflist


def _archive(tmp_path: Path, name: str) -> Path:
    payload = tmp_path / "payload"
    payload.write_bytes(b"\x7fELF not really")
    files = [
        ImageFile("bin"),
        ImageFile("bin/busybox", source=payload),
        ImageFile("bin/sh", link="busybox", mode=0o777),
    ]
    write_oci_archive(tmp_path / name, "localhost/x/y:1", files, {"Cmd": ["/bin/sh"]})
    return tmp_path / name


def _blobs(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {
            m.name: f.read()
            for m in tar.getmembers()
            if m.isfile() and (f := tar.extractfile(m)) is not None
        }


def _blob(blobs: dict[str, bytes], digest: str) -> bytes:
    data = blobs[f"blobs/sha256/{digest.removeprefix('sha256:')}"]
    assert "sha256:" + hashlib.sha256(data).hexdigest() == digest
    return data


def test_oci_archive_is_a_consistent_image_layout(tmp_path: Path) -> None:
    blobs = _blobs(_archive(tmp_path, "a.tar"))
    assert json.loads(blobs["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    (entry,) = json.loads(blobs["index.json"])["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == "localhost/x/y:1"
    manifest: dict[str, Any] = json.loads(_blob(blobs, entry["digest"]))
    config = json.loads(_blob(blobs, manifest["config"]["digest"]))
    (layer_desc,) = manifest["layers"]
    layer = _blob(blobs, layer_desc["digest"])
    # An uncompressed layer: its diff id is its digest.
    assert config["rootfs"]["diff_ids"] == [layer_desc["digest"]]
    assert config["config"]["Cmd"] == ["/bin/sh"]
    (tmp_path / "layer.tar").write_bytes(layer)
    with tarfile.open(tmp_path / "layer.tar") as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["bin/sh"].issym() and members["bin/sh"].linkname == "busybox"
    assert members["bin/busybox"].isfile() and members["bin/busybox"].mode == 0o755
    assert members["bin"].isdir()


def test_oci_archive_is_reproducible(tmp_path: Path) -> None:
    assert _archive(tmp_path, "a.tar").read_bytes() == _archive(tmp_path, "b.tar").read_bytes()


def test_containerd_config_keeps_every_path_under_the_node(tmp_path: Path) -> None:
    node = tmp_path / "run" / "rn1"
    text = containerd_config(
        node,
        sandbox_image="localhost/p:1",
        cni_bin_dir=node / "cni" / "bin",
        cni_conf_dir=node / "cni" / "net.d",
    )
    doc = tomllib.loads(text)
    assert doc["version"] == 2
    assert doc["root"].startswith(str(node)) and doc["state"].startswith(str(node))
    assert doc["grpc"]["address"] == str(node / "containerd.sock")
    cri = doc["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == "localhost/p:1"
    assert cri["restrict_oom_score_adj"] is True
    assert cri["netns_mounts_under_state_dir"] is True
    runc = cri["containerd"]["runtimes"]["runc"]
    assert runc["options"] == {"SystemdCgroup": False, "Root": str(node / "runc")}
    # One directory: containerd 1.6 does not split a search path.
    assert cri["cni"]["bin_dir"] == str(node / "cni" / "bin")
    assert cri["cni"]["conf_dir"] == str(node / "cni" / "net.d")


def test_default_network_is_the_loopback_plugin() -> None:
    conf = loopback_conflist("rn1")
    assert conf["cniVersion"] == "1.0.0"
    assert [p["type"] for p in conf["plugins"]] == ["loopback"]
