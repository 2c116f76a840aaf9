"""Log formats, the pod logger's context, and library logger levels."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from controller.runtime.log import parse_level, pod_logger, setup_logging


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """setup_logging changes process-wide state: put the root logger back afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    libs = {n: logging.getLogger(n).level for n in ("urllib3", "kubernetes", "ovsdbapp")}
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
    root.setLevel(level)
    for name, lvl in libs.items():
        logging.getLogger(name).setLevel(lvl)


def _lines(stream: io.StringIO) -> list[str]:
    return [line for line in stream.getvalue().splitlines() if line]


@pytest.mark.usefixtures("restore_logging")
def test_json_lines_carry_ts_level_logger_msg_and_extras() -> None:
    out = io.StringIO()
    setup_logging("info", "json", stream=out)

    pod_logger("ns1/p1", logging.getLogger("controller.pod.controller")).info(
        "allocated %s", "10.16.0.5", extra={"subnet": "ovn-default"}
    )
    logging.getLogger("controller.pod.controller").debug("hidden at info")

    (line,) = _lines(out)
    doc = json.loads(line)
    assert doc["level"] == "INFO"
    assert doc["logger"] == "controller.pod.controller"
    assert doc["msg"] == "allocated 10.16.0.5"
    assert doc["pod"] == "ns1/p1" and doc["subnet"] == "ovn-default"
    assert doc["ts"].endswith("Z") and "T" in doc["ts"]


@pytest.mark.usefixtures("restore_logging")
def test_json_survives_exceptions_and_unserialisable_extras() -> None:
    out = io.StringIO()
    setup_logging("debug", "json", stream=out)
    log = logging.getLogger("controller.test")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("failed", extra={"obj": object()})

    doc = json.loads(_lines(out)[0])
    assert doc["level"] == "ERROR"
    assert "RuntimeError: boom" in doc["exc"]
    assert doc["obj"].startswith("<object object")


@pytest.mark.usefixtures("restore_logging")
def test_text_format_appends_extras() -> None:
    out = io.StringIO()
    setup_logging("info", "text", stream=out)
    pod_logger("ns1/p1").warning("no address for %s", "eth0")

    (line,) = _lines(out)
    assert line.endswith("WARNING controller.pod.controller: no address for eth0 pod=ns1/p1")


@pytest.mark.usefixtures("restore_logging")
def test_setup_is_idempotent_and_quiets_libraries() -> None:
    first, second = io.StringIO(), io.StringIO()
    setup_logging("info", "text", stream=first)
    setup_logging("info", "json", stream=second)
    logging.getLogger("controller").info("once")
    logging.getLogger("urllib3.connectionpool").info("Starting new HTTPS connection")
    logging.getLogger("ovsdbapp.backend.ovs_idl.vlog").info("tcp:127.0.0.1:6641: connected")

    assert first.getvalue() == ""
    msgs = [json.loads(line)["msg"] for line in _lines(second)]
    assert msgs == ["once", "tcp:127.0.0.1:6641: connected"]

    setup_logging("debug", "text", stream=first)
    assert logging.getLogger("controller").getEffectiveLevel() == logging.DEBUG
    assert logging.getLogger("urllib3").getEffectiveLevel() == logging.WARNING
    assert logging.getLogger("ovsdbapp.backend.ovs_idl.vlog").getEffectiveLevel() == logging.INFO
    setup_logging("debug", "text", stream=first, debug_libraries=True)
    assert logging.getLogger("urllib3").getEffectiveLevel() == logging.DEBUG


def test_bad_level_or_format_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="log level"):
        setup_logging("loud", "text")
    with pytest.raises(ValueError, match="log format"):
        setup_logging("info", "xml")
    assert parse_level("Warning") == logging.WARNING
    assert parse_level(10) == logging.DEBUG


@pytest.mark.usefixtures("restore_logging")
def test_the_default_stream_is_the_stderr_of_the_moment(monkeypatch: pytest.MonkeyPatch) -> None:
    # A handler bound to the stderr of its set-up time writes into a closed file once that
    # stream is replaced and closed (an embedding program's or a test runner's capture).
    first = io.StringIO()
    monkeypatch.setattr("sys.stderr", first)
    setup_logging("info", "text")
    first.close()
    second = io.StringIO()
    monkeypatch.setattr("sys.stderr", second)
    logging.getLogger("controller.test").warning("after the swap")
    written = second.getvalue()
    assert "Logging error" not in written
    assert any(line.endswith("after the swap") for line in written.splitlines())
