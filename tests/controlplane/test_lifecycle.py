"""The plane's own lifecycle: restarting kube-apiserver and etcd keeps the data, compaction makes
old resourceVersions answer 410 Gone, and start-up failures name the component and its log."""

from __future__ import annotations

import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from controller.sandbox.cluster.controlplane import (
    Binaries,
    BinariesMissing,
    RealControlPlane,
    find_binaries,
)
from controller.sandbox.processes import SandboxError

pytestmark = pytest.mark.realcp


def configmap(core: Any, namespace: str) -> str:
    name = f"cm-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_config_map(namespace, {"metadata": {"name": name}, "data": {"k": "v"}})
    return name


def test_apiserver_sigkill_and_restart_keeps_the_data(
    real_control_plane: RealControlPlane, namespace: str
) -> None:
    plane = real_control_plane
    with plane.api_client() as api:
        name = configmap(client.CoreV1Api(api), namespace)
    old_pid = plane.apiserver.pid
    plane.apiserver.restart(kill=True)
    assert plane.apiserver.pid != old_pid
    with plane.api_client() as api:
        cm = client.CoreV1Api(api).read_namespaced_config_map(name, namespace)
    assert cm.data == {"k": "v"}


def test_etcd_restart_is_survived(real_control_plane: RealControlPlane, namespace: str) -> None:
    plane = real_control_plane
    with plane.api_client() as api:
        name = configmap(client.CoreV1Api(api), namespace)
    plane.etcd.restart(kill=False)
    plane.apiserver.wait_ready()
    with plane.api_client() as api:
        core = client.CoreV1Api(api)
        assert core.read_namespaced_config_map(name, namespace).data == {"k": "v"}
        configmap(core, namespace)  # writes work again


def test_compaction_makes_old_resource_versions_gone(control_plane_binaries: Binaries) -> None:
    """With the watch cache on, kube-apiserver answers old resourceVersions from its own cache
    (snapshots for Exact lists, its event window for watches), hiding etcd's compaction; a
    plane with `--watch-cache=false` hands them to etcd, which answers 410 once compacted."""
    with (
        tempfile.TemporaryDirectory(prefix="realcp-compact") as d,
        RealControlPlane(
            Path(d), binaries=control_plane_binaries, apiserver_args=["--watch-cache=false"],
            controller_manager=False,
            scheduler=False,
        ) as plane,
        plane.api_client() as api,
    ):  # fmt: skip
        core = client.CoreV1Api(api)
        old = core.list_namespaced_config_map("default").metadata.resource_version
        # Two writes: a watch from `old` needs old+1, which must be compacted away too.
        configmap(core, "default")
        configmap(core, "default")
        revision = plane.compact_etcd()
        assert revision > int(old) + 1
        with pytest.raises(ApiException) as err:
            core.list_namespaced_config_map(
                "default", resource_version=old, resource_version_match="Exact"
            )
        assert err.value.status == 410
        events = watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version=old, timeout_seconds=5
        )
        with pytest.raises(ApiException) as gone:
            next(iter(events))
        assert gone.value.status == 410


def test_audit_log_records_requests(real_control_plane: RealControlPlane, namespace: str) -> None:
    with real_control_plane.api_client() as api:
        name = configmap(client.CoreV1Api(api), namespace)
    events = [
        e
        for e in real_control_plane.audit_events()
        if e.get("objectRef", {}).get("name") == name and e["verb"] == "create"
    ]
    assert events and events[-1]["responseStatus"]["code"] == 201


def test_a_component_that_cannot_start_is_named_with_its_log(
    control_plane_binaries: Binaries,
) -> None:
    binaries = control_plane_binaries
    with tempfile.TemporaryDirectory(prefix="realcp-bad") as d:
        plane = RealControlPlane(
            Path(d), binaries=binaries, apiserver_args=["--no-such-flag"], ready_timeout=20
        )
        with pytest.raises(SandboxError) as err:
            plane.start()
        message = str(err.value)
        assert "kube-apiserver exited with code" in message
        assert str(Path(d) / "kube-apiserver.log") in message
        assert "no-such-flag" in message  # the log's tail says why
        assert plane.components == []  # etcd, already started, was stopped


def test_missing_binaries_say_how_to_build_them(tmp_path: Path) -> None:
    with pytest.raises(BinariesMissing, match="build-control-plane"):
        find_binaries({"KUBE_OVN_CONTROL_PLANE_BIN": str(tmp_path)})
    with pytest.raises(BinariesMissing, match="not built"):
        find_binaries({"KUBE_OVN_CONTROL_PLANE_CACHE": str(tmp_path)})


def test_a_restart_from_a_short_lived_thread_survives_the_thread(
    real_control_plane: RealControlPlane,
) -> None:
    # PDEATHSIG belongs to the forking thread: a restart done by a thread that then ends must
    # not take kube-apiserver down with it.
    plane = real_control_plane
    worker = threading.Thread(target=plane.apiserver.restart)
    worker.start()
    worker.join(120)
    assert not worker.is_alive()
    pid = plane.apiserver.pid
    plane.apiserver.wait_ready()
    with plane.api_client() as api:
        assert client.VersionApi(api).get_code().git_version.startswith("v1.")
    assert plane.apiserver.pid == pid and plane.apiserver.running
