"""The Dockerfile's essentials, checked by parsing it (no container engine on the test machines).

Checked: the base image, a numeric non-root USER that matches the chart's runAsUser, the source
root as WORKDIR so `python -m cmd.controller` resolves, the exec-form ENTRYPOINT (kube-ovn's
/kube-ovn/start-controller.sh, run here with a stand-in python), the metrics
port the chart probes, and a .dockerignore that keeps the build context small without dropping
what the image needs.
"""

from __future__ import annotations

import fnmatch
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.chart.helpers import (
    CHART_DIR,
    DOCKERFILE,
    DOCKERIGNORE,
    ROOT,
    Instruction,
    dockerfile_instructions,
)

START_SCRIPT = "/kube-ovn/start-controller.sh"
SCRIPT = ROOT / "image" / "start-controller.sh"


def _instructions() -> list[Instruction]:
    return dockerfile_instructions(DOCKERFILE.read_text(encoding="utf-8"))


def _last(name: str) -> Instruction:
    found = [i for i in _instructions() if i.name == name]
    assert found, f"no {name} in the Dockerfile"
    return found[-1]


def _chart_defaults() -> dict[str, object]:
    loaded: dict[str, object] = yaml.safe_load(
        (CHART_DIR / "values.yaml").read_text(encoding="utf-8")
    )
    return loaded


def test_parser_joins_continuations_and_drops_comments() -> None:
    text = 'FROM a\n# c\nRUN x \\\n    # inner\n    && y\nENTRYPOINT ["p", "-m"]\n'
    assert dockerfile_instructions(text) == [
        Instruction("FROM", "a"),
        Instruction("RUN", "x && y"),
        Instruction("ENTRYPOINT", '["p", "-m"]'),
    ]


def test_single_stage_on_python_311_slim() -> None:
    froms = [i for i in _instructions() if i.name == "FROM"]
    assert [i.words()[0].split("@")[0] for i in froms] == ["python:3.11-slim-bookworm"]


def test_runs_as_the_non_root_uid_the_chart_expects() -> None:
    instructions = _instructions()
    user = _last("USER")
    uid, _, gid = user.args.partition(":")
    assert uid.isdigit() and int(uid) != 0, "USER must be a numeric non-root uid"
    assert gid.isdigit() and int(gid) != 0
    # Nothing after USER may run as a different user or need root.
    assert instructions.index(user) > max(n for n, i in enumerate(instructions) if i.name == "RUN")
    pod_security = _chart_defaults()["podSecurityContext"]
    assert isinstance(pod_security, dict)
    assert (int(uid), int(gid)) == (pod_security["runAsUser"], pod_security["runAsGroup"])


def test_entrypoint_is_kube_ovns_start_script_in_the_source_root() -> None:
    # kube-ovn v1.8.18's Deployment runs /kube-ovn/start-controller.sh (dist/images/install.sh)
    assert _last("ENTRYPOINT").exec_form() == [START_SCRIPT]
    copies = [i.words() for i in _instructions() if i.name == "COPY"]
    assert ["image/start-controller.sh", START_SCRIPT] in copies
    runs = " ".join(i.args for i in _instructions() if i.name == "RUN")
    assert f"chmod 0755 {START_SCRIPT}" in runs
    workdir = _last("WORKDIR").args
    assert workdir.startswith("/")
    assert f"KUBE_OVN_POD_CONTROLLER_ROOT:-{workdir}" in SCRIPT.read_text(encoding="utf-8")
    # `cmd` is not an installed package: it must sit in the working directory.
    cmd_copies = [words for words in copies if words[:-1] == ["cmd"]]
    assert cmd_copies, "the cmd/ package is not copied"
    assert cmd_copies[0][-1] in ("./cmd", "cmd", f"{workdir}/cmd")


@pytest.mark.parametrize(
    "args",
    [
        ["--default-cidr=10.16.0.0/16", "--v=3"],  # the chart's Deployment: flags only
        [START_SCRIPT, "--default-cidr=10.16.0.0/16", "--v=3"],  # kube-ovn's: the script first
    ],
)
def test_start_script_runs_the_controller_module_with_the_deployments_args(
    tmp_path: Path, args: list[str]
) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    python = fake / "python"
    python.write_text('#!/bin/sh\nprintf "%s\\n" "$PWD" "$@"\n', encoding="utf-8")
    python.chmod(0o755)
    env = {
        "PATH": f"{fake}:/usr/bin:/bin",
        "KUBE_OVN_POD_CONTROLLER_ROOT": str(ROOT),
    }
    out = subprocess.run(
        [str(SCRIPT), *args], env=env, capture_output=True, text=True, check=True, timeout=10
    ).stdout.splitlines()
    assert out == [str(ROOT), "-m", "cmd.controller", "--default-cidr=10.16.0.0/16", "--v=3"]


def test_installs_the_package_with_pip() -> None:
    runs = " ".join(i.args for i in _instructions() if i.name == "RUN")
    assert "pip install ." in runs or "pip install --no-deps ." in runs


def test_every_copied_source_exists() -> None:
    for words in (i.words() for i in _instructions() if i.name == "COPY"):
        for source in words[:-1]:
            assert not source.startswith("--"), f"unexpected COPY option {source}"
            assert (ROOT / source).exists(), f"COPY source {source} is not in the repository"


def test_exposes_the_metrics_port_the_chart_probes() -> None:
    metrics = _chart_defaults()["metrics"]
    assert isinstance(metrics, dict)
    assert _last("EXPOSE").words() == [str(metrics["port"])]


def test_dockerignore_keeps_what_the_image_needs() -> None:
    patterns = [
        line.strip()
        for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]

    def ignored(path: str) -> bool:
        return any(
            fnmatch.fnmatch(path, p) or path.startswith(p.rstrip("/") + "/") for p in patterns
        )

    for needed in (
        "setup.cfg",
        "pyproject.toml",
        "README.md",
        "controller/app.py",
        "cmd/controller.py",
    ):
        assert not ignored(needed), f".dockerignore drops {needed}"
    for heavy in (".git", "tests/conftest.py", "charts/kube-ovn-pod-controller/Chart.yaml"):
        assert ignored(heavy), f".dockerignore keeps {heavy}"
