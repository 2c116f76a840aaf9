"""`controller.process.main` exit codes: 2 for a bad command line, 1 when start-up can't connect."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.app import EXIT_FAILURE
from controller.config import EXIT_USAGE
from controller.process import main
from controller.sandbox.apiserver.kubeconfig import write_kubeconfig
from tests.fixtures.logging_state import preserved_logging


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    with preserved_logging():
        yield


def test_unknown_flag_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--no-such-flag"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "--no-such-flag" in err


def test_invalid_value_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--ovn-nb-addr=tcp:127.0.0.1:6641", "--worker-num=0"]) == EXIT_USAGE
    assert "--worker-num" in capsys.readouterr().err


def test_missing_nb_address_exits_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("OVN_DB_IPS", "OVN_NB_SERVICE_HOST"):
        monkeypatch.delenv(var, raising=False)
    assert main(["--leader-elect=false"]) == EXIT_USAGE
    assert "--ovn-nb-addr is required" in capsys.readouterr().err


def test_unreadable_kubeconfig_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        f"--kubeconfig={tmp_path / 'missing'}",
        "--ovn-nb-addr=unix:/nonexistent/nb.sock",
        "--leader-elect=false",
        "--metrics-port=0",
    ]
    assert main(argv) == EXIT_FAILURE
    assert "error: " in capsys.readouterr().err


def test_unreachable_nb_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")
    argv = [
        f"--kubeconfig={kubeconfig}",
        f"--ovn-nb-addr=unix:{tmp_path / 'no-nb.sock'}",
        "--ovn-timeout=1",
        "--leader-elect=false",
        "--metrics-port=0",
    ]
    assert main(argv) == EXIT_FAILURE
    assert "error: " in capsys.readouterr().err


def test_check_subcommand_runs_the_audit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # no API server behind the kubeconfig: the audit reports it cannot read (exit 2)
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")
    argv = [
        "check",
        f"--kubeconfig={kubeconfig}",
        f"--ovn-nb-addr=unix:{tmp_path / 'nb.sock'}",
        "--ovn-timeout=1",
    ]
    assert main(argv) == 2
    assert "check: " in capsys.readouterr().out


def test_without_leader_election_not_ready_until_workers_start() -> None:
    # A replica that never campaigns has no standby state: it must not report ready in the
    # moment between starting its leading thread and that thread taking over (a bench saw a
    # 200 there, before IPAM was rebuilt).
    from controller.app import Controller
    from controller.config import parse_args

    ctl = Controller(parse_args(["--leader-elect=false", "--ovn-nb-addr=unix:/nonexistent"], {}))
    ctl._election_running.set()
    assert ctl.ready()[0] is False
    ctl.leading.set()
    assert ctl.ready() == (False, "leading: waiting for caches, bootstrap and IPAM")
    ctl.workers_started.set()
    assert ctl.ready() == (True, "ok")


@pytest.mark.parametrize(
    ("extra", "level"), [((), logging.WARNING), (("--log-level=info",), logging.INFO)]
)
def test_check_logs_only_warnings_unless_a_level_is_asked_for(
    tmp_path: Path, extra: tuple[str, ...], level: int
) -> None:
    # check's own output is its report: the connection chatter stays out of it by default
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")
    argv = [
        "check",
        f"--kubeconfig={kubeconfig}",
        f"--ovn-nb-addr=unix:{tmp_path / 'nb.sock'}",
        "--ovn-timeout=1",
        *extra,
    ]
    main(argv)
    assert logging.getLogger().level == level
