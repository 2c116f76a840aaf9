"""Remote parsing and connection settings (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.ovn.connection import NbConnectionConfig, enable_c_json_parser, parse_remotes


def test_parse_remotes_accepts_kube_ovn_forms() -> None:
    assert parse_remotes("tcp:10.0.0.1:6641") == ("tcp:10.0.0.1:6641",)
    assert parse_remotes("tcp:[fd00::1]:6641, ssl:10.0.0.2:6641 ,unix:/run/nb.sock") == (
        "tcp:[fd00::1]:6641",
        "ssl:10.0.0.2:6641",
        "unix:/run/nb.sock",
    )
    # What config builds from OVN_DB_IPS / OVN_NB_SERVICE_HOST, as kube-ovn's start script does.
    assert parse_remotes("tcp:[10.0.0.1]:6641,ssl:[10.0.0.2]:6641") == (
        "tcp:[10.0.0.1]:6641",
        "ssl:[10.0.0.2]:6641",
    )


@pytest.mark.parametrize(
    "bad",
    [
        "",
        ",",
        "10.0.0.1:6641",
        "tcp:10.0.0.1",
        "tcp:10.0.0.1:0",
        "tcp:10.0.0.1:70000",
        "tcp:fd00::1:6641",
        "tcp:[zz::1]:6641",
        "http:x:1",
        "unix:",
        "tcp::6641",
    ],
)
def test_parse_remotes_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="remote"):
        parse_remotes(bad)


def test_ssl_needs_key_cert_and_ca() -> None:
    with pytest.raises(ValueError, match="private key, certificate, CA"):
        NbConnectionConfig.from_addr("ssl:10.0.0.1:6641")
    cfg = NbConnectionConfig.from_addr(
        "ssl:10.0.0.1:6641,ssl:10.0.0.2:6641",
        timeout=5,
        ssl_private_key="k",
        ssl_certificate="c",
        ssl_ca_cert="ca",
    )
    assert cfg.remote == "ssl:10.0.0.1:6641,ssl:10.0.0.2:6641"


def test_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="timeout"):
        NbConnectionConfig.from_addr("unix:/x", timeout=0)


def test_c_json_parser_absent_is_reported(tmp_path: Path) -> None:
    import ovs.json

    before = ovs.json.PARSER
    assert enable_c_json_parser([tmp_path]) is (before == ovs.json.PARSER_C)
    assert before == ovs.json.PARSER
