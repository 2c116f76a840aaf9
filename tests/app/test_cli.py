"""The command line a newcomer meets first: `--help` answers without importing the clients,
every flag has a help text and a default worth printing, and a start-up error is one line."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from controller.app import EXIT_FAILURE
from controller.cli import main
from controller.config import build_parser
from tests.fixtures.logging_state import preserved_logging

ROOT = Path(__file__).resolve().parents[2]

HEAVY = ("kubernetes", "ovs", "ovsdbapp", "prometheus_client", "urllib3", "yaml")

_PROBE = """
import sys
from controller.cli import main
try:
    main(["--help"])
except SystemExit as e:
    assert e.code == 0, e.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[1:]))
print("imported:", ",".join(heavy), file=sys.stderr)
"""


@pytest.mark.server
def test_help_imports_no_client_library() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *HEAVY],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "--kubeconfig" in proc.stdout
    assert proc.stderr.strip() == "imported:", proc.stderr


def _actions() -> list[argparse.Action]:
    return [
        a
        for a in build_parser()._actions
        if not isinstance(a, argparse._HelpAction) and a.dest != "command"
    ]


def test_every_flag_has_a_help_text() -> None:
    missing = sorted(a.option_strings[0] for a in _actions() if not (a.help or "").strip())
    assert not missing, f"flags without a help text: {missing}"


def test_help_prints_no_empty_or_none_default() -> None:
    text = " ".join(build_parser().format_help().split())  # argparse wraps lines
    for wrong in ("(default: )", "(default: None)", "default: info (default"):
        assert wrong not in text


@pytest.mark.parametrize(
    ("flag", "default"),
    [
        ("--network-type", "(default: geneve)"),
        ("--default-vlan-name", "(default: ovn-vlan)"),
        ("--default-vlan-id", "(default: 1)"),
        ("--pod-nic-type", "(default: veth-pair)"),
        ("--log-level", "(default: info,"),
        ("--enable-lb", "(default: false)"),
        ("--leader-elect", "(default: true)"),
        ("--gc-interval", "(default: 360s)"),
    ],
)
def test_help_gives_the_default(flag: str, default: str) -> None:
    parser = build_parser()
    formatter = parser._get_formatter()
    (action,) = (a for a in parser._actions if flag in a.option_strings)
    entry = formatter._expand_help(action)
    assert entry.count("(default:") == 1 and default in entry, entry


def test_a_missing_kubeconfig_is_named_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nonexistent"
    argv = [
        f"--kubeconfig={missing}",
        "--ovn-nb-addr=unix:/nonexistent/nb.sock",
        "--leader-elect=false",
        "--metrics-port=0",
    ]
    with preserved_logging():  # main() installs its own root handler and levels
        assert main(argv) == EXIT_FAILURE
    lines = [line for line in capsys.readouterr().err.splitlines() if str(missing) in line]
    assert len(lines) == 1, lines
    assert lines[0] == f"error: cannot load Kubernetes config from {missing}: no such file"
