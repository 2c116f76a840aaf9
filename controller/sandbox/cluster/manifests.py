"""Manifests for the real control plane: the chart rendered as `helm template` would, and the
minimal CRDs of the foreign kinds the controller watches (`WATCHED_CRDS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from controller.sandbox.processes import SandboxError

CHART_DIR = Path(__file__).resolve().parents[3] / "charts" / "kube-ovn-pod-controller"


def render_chart(
    values: Mapping[str, Any] | None = None,
    *,
    release: str = "kopc",
    namespace: str = "kube-system",
    chart_dir: Path = CHART_DIR,
) -> list[dict[str, Any]]:
    """The chart's manifests as `helm template` renders them (Helm's Go SDK, no cluster)."""
    import yaml  # noqa: PLC0415

    try:
        import helm_python  # noqa: PLC0415 - a test extra, needed only here
    except ImportError as e:
        raise SandboxError(
            f"rendering the chart needs helm-python-sdk (pip install -e '.[test]'): {e}"
        ) from e
    with helm_python.Chart.load(chart_dir) as chart:
        files = chart.render(
            values=dict(values) if values is not None else None,
            name=release,
            namespace=namespace,
            is_install=True,
        )
    out: list[dict[str, Any]] = []
    for path in sorted(files):
        if path.endswith("NOTES.txt"):
            continue
        out.extend(d for d in yaml.safe_load_all(files[path]) if isinstance(d, dict))
    return out


def _crd(group: str, kind: str, plural: str, singular: str, *, status: bool) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
    }
    if status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": singular,
            },
            "versions": [version],
        },
    }


#: Minimal CRDs (namespaced, any content kept) for the foreign kinds the controller watches.
WATCHED_CRDS = (
    _crd("k8s.cni.cncf.io", "NetworkAttachmentDefinition", "network-attachment-definitions",
         "network-attachment-definition", status=False),
    _crd("kubevirt.io", "VirtualMachine", "virtualmachines", "virtualmachine", status=True),
    _crd("kubevirt.io", "VirtualMachineInstance", "virtualmachineinstances",
         "virtualmachineinstance", status=True),
)  # fmt: skip
