"""The files a real node runs from: containerd's configuration, the KubeletConfiguration, the
kubelet's client certificate, the default CNI network and the RBAC binding for nodes.

Pure functions of the node's directory and ports (`realnode.RealNode`), so that what a node
runs with can be read and tested without starting it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.sandbox.cluster.controlplane import ControlPlanePki
from controller.sandbox.processes import run_tool

if TYPE_CHECKING:
    from controller.sandbox.cluster.realnode import RealNode

NODE_CLUSTER_ROLE_BINDING = "kube-ovn-sandbox-nodes"


def issue_client_cert(pki: ControlPlanePki, directory: Path, name: str, subject: str) -> None:
    ext = directory / f"{name}.ext"
    ext.write_text(
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=clientAuth\n",
        encoding="utf-8",
    )
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run_tool(
        ["openssl", "req", "-new", *ec, "-keyout", str(directory / f"{name}.key"),
         "-out", str(directory / f"{name}.csr"), "-subj", subject]
    )  # fmt: skip
    run_tool(
        ["openssl", "x509", "-req", "-in", str(directory / f"{name}.csr"),
         "-CA", str(pki.ca_cert), "-CAkey", str(pki.ca_key), "-CAcreateserial",
         "-out", str(directory / f"{name}.crt"), "-days", "7", "-extfile", str(ext)]
    )  # fmt: skip


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def containerd_config(
    node_dir: Path, *, sandbox_image: str, cni_bin_dir: Path, cni_conf_dir: Path
) -> str:
    """containerd 1.6's configuration (version 2) for one node, every path under `node_dir`."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    tables: list[tuple[str, dict[str, Any]]] = [
        ("", {
            "version": 2,
            "root": str(node_dir / "containerd" / "root"),
            "state": str(node_dir / "containerd" / "state"),
            # Not used here; each would otherwise probe or fail on this host at every start.
            "disabled_plugins": [
                "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
                "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
            ],
        }),
        ("grpc", {"address": str(node_dir / "containerd.sock")}),
        ("ttrpc", {"address": str(node_dir / "containerd.sock.ttrpc")}),
        ("debug", {"address": ""}),
        ("metrics", {"address": ""}),
        ('plugins."io.containerd.internal.v1.opt"', {"path": str(node_dir / "containerd" / "opt")}),
        (cri, {
            "sandbox_image": sandbox_image,
            "enable_selinux": False,
            # The host withholds CAP_SYS_RESOURCE: runc cannot lower oom_score_adj below
            # containerd's own, as the kubelet asks for the pause container (-998).
            "restrict_oom_score_adj": True,
            # Pod network namespaces under the node's state dir, not the shared /var/run/netns.
            "netns_mounts_under_state_dir": True,
            "stream_server_address": "127.0.0.1",
            "stream_server_port": "0",
            "disable_apparmor": True,
        }),
        (f"{cri}.containerd", {"snapshotter": "overlayfs", "default_runtime_name": "runc"}),
        (f"{cri}.containerd.runtimes.runc", {"runtime_type": "io.containerd.runc.v2"}),
        (f"{cri}.containerd.runtimes.runc.options", {
            "SystemdCgroup": False,
            "Root": str(node_dir / "runc"),
        }),
        (f"{cri}.cni", {
            "bin_dir": str(cni_bin_dir),
            "conf_dir": str(cni_conf_dir),
            "max_conf_num": 1,
        }),
    ]  # fmt: skip
    lines: list[str] = []
    for name, values in tables:
        if name:
            lines.append(f"\n[{name}]")
        lines.extend(f"  {k} = {_toml(v)}" for k, v in values.items())
    return "\n".join(lines) + "\n"


def loopback_conflist(node: str) -> dict[str, Any]:
    return {"cniVersion": "1.0.0", "name": "sandbox-loopback", "plugins": [{"type": "loopback"}]}


def kubelet_configuration(node: RealNode, ca_cert: Path) -> dict[str, Any]:
    """The node's KubeletConfiguration (kubelet.config.k8s.io/v1beta1)."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # cgroup v1 hosts are refused by default from kubelet 1.35 on.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": node.cgroup_root,
        "cgroupsPerQOS": True,
        "enforceNodeAllocatable": [],
        "containerRuntimeEndpoint": f"unix://{node.socket}",
        "address": node.ip,
        "port": node.kubelet_port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": node.healthz_port,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(ca_cert)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "failSwapOn": False,
        # No disk or memory thresholds: a busy build machine must not evict test pods.
        "evictionHard": {"memory.available": "0%", "nodefs.available": "0%",
                         "imagefs.available": "0%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "localStorageCapacityIsolation": False,
        "resolvConf": "",
        "clusterDomain": "cluster.local",
        "clusterDNS": ["10.0.0.10"],
        "podLogsDir": str(node.dir / "pod-logs"),
        "volumePluginDir": str(node.dir / "volume-plugins"),
        "serializeImagePulls": False,
        "registerNode": True,
        "nodeStatusUpdateFrequency": "5s",
        "syncFrequency": "10s",
        "staticPodPath": "",
        # Its iptables chains (KUBE-FIREWALL dropping non-loopback sources to 127/8, the
        # canaries) are machine-wide, shared by every kubelet and outlive them.
        "makeIPTablesUtilChains": False,
    }  # fmt: skip


#: Kubelets authenticate as `system:node:<name>` in `system:nodes`; without the Node authorizer
#: (the plane runs RBAC only) that group needs the `system:node` role bound explicitly.
NODE_BINDING: dict[str, Any] = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRoleBinding",
    "metadata": {"name": NODE_CLUSTER_ROLE_BINDING},
    "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "system:node",
    },
    "subjects": [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}
    ],
}
