"""klog's log format and destinations, runtime level changes, worker lines, log-line metrics."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from controller.core.errors import InvalidPodNetworkError
from controller.ovn.api import OvnTimeoutError
from controller.queues import RateLimitingQueue, default_controller_rate_limiter
from controller.runtime.log import (
    LogOutputs,
    current_level,
    line_counts,
    set_verbosity,
    setup_logging,
)
from controller.runtime.metrics import ControllerMetrics, MetricsServer
from controller.runtime.worker import process_next_work_item
from controller.testing.clock import FakeClock

# klog: Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg
KLOG_LINE = re.compile(r"^([IWEF])(\d{4}) (\d\d:\d\d:\d\d\.\d{6}) +(\d+) ([\w.]+):(\d+)\] (.*)$")


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    libs = {n: logging.getLogger(n).level for n in ("urllib3", "kubernetes", "ovsdbapp")}
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
            h.close()
    for h in handlers:
        if h not in root.handlers:
            root.addHandler(h)
    root.setLevel(level)
    for name, lvl in libs.items():
        logging.getLogger(name).setLevel(lvl)


def _lines(stream: io.StringIO) -> list[str]:
    return [line for line in stream.getvalue().splitlines() if line]


def test_klog_header_and_structured_fields() -> None:
    out = io.StringIO()
    setup_logging("info", "klog", stream=out)
    logging.getLogger("controller.x").warning("no address for %s", "eth0", extra={"pod": "a/b c"})
    logging.getLogger("controller.x").info("plain")

    first, second = _lines(out)
    match = KLOG_LINE.match(first)
    assert match, first
    assert match.group(1) == "W"
    assert int(match.group(4)) == os.getpid()
    assert match.group(5) == "test_klog_logging.py"
    assert match.group(7) == 'no address for eth0 pod="a/b c"'
    assert second.startswith("I") and second.endswith("] plain")


def test_skip_headers_leaves_the_message() -> None:
    out = io.StringIO()
    setup_logging("info", "klog", stream=out, skip_headers=True)
    logging.getLogger("controller.x").error("boom")
    assert _lines(out) == ["boom"]


def test_logtostderr_false_writes_the_file_and_stderr_gets_errors(tmp_path: Path) -> None:
    err = io.StringIO()
    log_file = tmp_path / "logs" / "kube-ovn-controller.log"
    setup_logging("info", "klog", stream=err, outputs=LogOutputs(False, False, str(log_file)))
    log = logging.getLogger("controller.x")
    log.info("to the file")
    log.error("to both")
    for h in logging.getLogger().handlers:
        h.flush()
    lines = log_file.read_text().splitlines()
    matches = [KLOG_LINE.match(line) for line in lines]
    assert [m.group(7) if m else line for m, line in zip(matches, lines, strict=True)] == [
        "to the file",
        "to both",
    ]
    assert [line.split("] ")[1] for line in _lines(err)] == ["to both"]


def test_alsologtostderr_copies_everything(tmp_path: Path) -> None:
    err = io.StringIO()
    log_file = tmp_path / "c.log"
    setup_logging("info", "text", stream=err, outputs=LogOutputs(False, True, str(log_file)))
    logging.getLogger("controller.x").info("both")
    for h in logging.getLogger().handlers:
        h.flush()
    assert "both" in log_file.read_text()
    assert "both" in err.getvalue()


def test_log_dir_gets_a_klog_named_file_and_symlink(tmp_path: Path) -> None:
    setup_logging(
        "info", "klog", stream=io.StringIO(), outputs=LogOutputs(False, log_dir=str(tmp_path))
    )
    logging.getLogger("controller.x").info("in the dir")
    for h in logging.getLogger().handlers:
        h.flush()
    link = tmp_path / "kube-ovn-controller.INFO"
    assert link.is_symlink()
    assert ".log.INFO." in os.readlink(link)
    assert "in the dir" in link.read_text()


def test_a_full_log_file_starts_over(tmp_path: Path) -> None:
    log_file = tmp_path / "c.log"
    setup_logging(
        "info",
        "klog",
        stream=io.StringIO(),
        outputs=LogOutputs(False, log_file=str(log_file), log_file_max_size=1),
    )
    log = logging.getLogger("controller.x")
    big = "x" * 1000
    for i in range(1100):  # about 1.1 MB
        log.info("%d %s", i, big)
    for h in logging.getLogger().handlers:
        h.flush()
    assert log_file.stat().st_size < 1024 * 1024
    assert not list(tmp_path.glob("c.log.*"))  # klog keeps no backup
    assert " 1099 " in log_file.read_text()


def test_an_unwritable_log_file_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ValueError, match="cannot open the log file"):
        setup_logging("info", "klog", outputs=LogOutputs(False, log_file=str(blocker / "x.log")))


def test_set_verbosity_at_runtime() -> None:
    out = io.StringIO()
    setup_logging("info", "text", stream=out)
    log = logging.getLogger("controller.x")
    log.debug("hidden")
    assert set_verbosity("5") == "log level set to debug"
    log.debug("shown")
    assert logging.getLogger("urllib3").getEffectiveLevel() == logging.WARNING  # floor kept
    assert set_verbosity("0") == "log level set to info"
    log.debug("hidden again")
    assert current_level() == logging.INFO
    with pytest.raises(ValueError, match="invalid verbosity"):
        set_verbosity("loud")
    msgs = [line for line in _lines(out) if "controller.x" in line]
    assert [m.rsplit(": ", 1)[1] for m in msgs] == ["shown"]


def test_put_debug_flags_v_changes_the_level_of_a_running_server() -> None:
    setup_logging("info", "text", stream=io.StringIO())
    registry = CollectorRegistry()
    with MetricsServer(registry, 0, host="127.0.0.1", debug_flags={"v": set_verbosity}) as srv:
        url = f"http://127.0.0.1:{srv.port}/debug/flags/v"
        req = urllib.request.Request(url, data=b"4", method="PUT")
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.status == 200
            assert resp.read() == b"log level set to debug\n"
        assert current_level() == logging.DEBUG
        bad = urllib.request.Request(url, data=b"loud", method="PUT")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(bad, timeout=5)
        assert err.value.code == 400
        other = urllib.request.Request(url + "x", data=b"1", method="PUT")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(other, timeout=5)
        assert err.value.code == 404


def test_json_worker_lines_carry_pod_key_queue_and_one_line_per_retry() -> None:
    out = io.StringIO()
    setup_logging("info", "json", stream=out)
    clock = FakeClock()
    queue = RateLimitingQueue[str](
        default_controller_rate_limiter(clock), name="AddPod", clock=clock
    )
    errors: list[Exception] = [OvnTimeoutError("NB timed out"), InvalidPodNetworkError("bad")]

    def handler(key: str) -> None:
        if errors:
            raise errors.pop(0)

    try:
        for _ in range(3):
            queue.add("ns1/p1")
            process_next_work_item(queue, handler, name="AddPod", clock=clock)
    finally:
        queue.shut_down()
    docs = [json.loads(line) for line in _lines(out)]
    worker = [d for d in docs if d["logger"] == "controller.runtime.worker"]
    assert [d["level"] for d in worker] == ["ERROR", "WARNING", "INFO"]  # one line per item
    for d in worker:
        assert (d["pod"], d["key"], d["queue"]) == ("ns1/p1", "ns1/p1", "AddPod")
        assert d["msg"].startswith("take 0 ms to handle AddPod ns1/p1")
    assert worker[0]["msg"].endswith("NB timed out, requeuing")
    assert "exc" not in worker[0]  # an expected failure: no traceback


def test_log_lines_and_process_metrics_are_exposed() -> None:
    setup_logging("info", "text", stream=io.StringIO())
    before = line_counts()
    logging.getLogger("controller.x").warning("counted")
    logging.getLogger("controller.x").debug("not emitted, not counted")
    assert line_counts()["WARN"] == before["WARN"] + 1
    assert line_counts()["INFO"] == before["INFO"]
    registry = CollectorRegistry()
    ControllerMetrics(registry, api_host="https://10.96.0.1")
    assert registry.get_sample_value("klog_lines_total", {"level": "WARN"}) == line_counts()["WARN"]
    assert registry.get_sample_value("process_resident_memory_bytes")
    assert registry.get_sample_value("process_cpu_seconds_total") is not None
    names = {m.name for m in registry.collect()}
    assert {"python_info", "python_gc_objects_collected", "process_open_fds"} <= names


def test_rest_client_host_is_host_port() -> None:
    registry = CollectorRegistry()
    metrics = ControllerMetrics(registry, api_host="https://10.96.0.1", runtime_collectors=False)
    metrics.observe_kube_request("GET", "/api/v1/pods", "200", 0.01)
    labels = {"code": "200", "method": "GET", "host": "10.96.0.1:443"}
    assert registry.get_sample_value("rest_client_requests_total", labels) == 1.0
    for url, want in (
        ("http://127.0.0.1:8080", "127.0.0.1:8080"),
        ("https://[fd00::1]:6443/", "[fd00::1]:6443"),
        ("10.96.0.1:443", "10.96.0.1:443"),
    ):
        other = ControllerMetrics(CollectorRegistry(), api_host=url, runtime_collectors=False)
        assert other._api_host == want


def _non_loopback_ipv4() -> str | None:
    import socket

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a source address
            address = str(s.getsockname()[0])
    except OSError:
        return None
    return None if address.startswith("127.") else address


def test_put_debug_flags_is_refused_from_off_the_node() -> None:
    address = _non_loopback_ipv4()
    if address is None:
        pytest.skip("no non-loopback IPv4 address on this machine")
    setup_logging("info", "text", stream=io.StringIO())
    with MetricsServer(
        CollectorRegistry(), 0, host="0.0.0.0", debug_flags={"v": set_verbosity}
    ) as srv:
        req = urllib.request.Request(
            f"http://{address}:{srv.port}/debug/flags/v", data=b"5", method="PUT"
        )
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=5)
        assert err.value.code == 403
    assert current_level() == logging.INFO
