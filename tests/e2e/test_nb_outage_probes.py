"""The probes see the NB: a real ovsdb-server stopped makes /readyz 503 at once and /healthz 503
once --nb-unreachable-timeout has passed, answering at once even while a pod's NB write waits
out the outage; restarted, both are 200 again. Start-up waits for an NB that is not up yet
(with backoff, one human line per attempt) instead of failing."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest

from controller.app import Controller
from tests.e2e.conftest import Cluster, StartController, launch_controller
from tests.e2e.helpers import allocated_pods, http_get, pod, running, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def _probe(ctl: Controller, path: str) -> tuple[int, str]:
    return http_get(f"http://127.0.0.1:{ctl.metrics_port}{path}")


def test_nb_outage_flips_readyz_then_healthz(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = running(start_controller("--nb-unreachable-timeout=2", "--ovn-timeout=30"))
    wait_for(lambda: _probe(ctl, "/readyz")[0] == 200, message="ready")
    assert _probe(ctl, "/healthz")[0] == 200

    cluster.nb_server.stop()
    # its NB write waits up to --ovn-timeout for the server, far longer than a probe's timeout
    cluster.server.store.create("pods", pod("during-outage"))
    _, body = wait_for(
        lambda: r if (r := _probe(ctl, "/readyz"))[0] == 503 else None, message="readyz 503"
    )
    assert body.startswith("OVN NB connection down for")
    _, body = wait_for(
        lambda: r if (r := _probe(ctl, "/healthz"))[0] == 503 else None,
        timeout=20,
        message="healthz 503",
    )
    assert "OVN NB unreachable for" in body and "--nb-unreachable-timeout 2s" in body

    cluster.nb_server.start()
    wait_for(lambda: _probe(ctl, "/readyz")[0] == 200, timeout=30, message="ready again")
    assert _probe(ctl, "/healthz") == (200, "ok\n")
    wait_for(
        lambda: "during-outage" in allocated_pods(cluster.server.store),
        timeout=60,
        message="the pod added during the outage allocated",
    )


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        self.messages.append(msg)
        if msg.startswith("waiting for the OVN NB"):
            self.seen.set()


@pytest.fixture
def startup_records() -> Iterator[_Records]:
    handler = _Records()
    log = logging.getLogger("controller.runtime.startup")
    old_level = log.level
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(old_level)


def test_startup_waits_for_an_nb_that_is_not_up_yet(
    cluster: Cluster, startup_records: _Records
) -> None:
    cluster.nb_server.stop()
    started: list[Controller] = []
    failed: list[BaseException] = []

    def start() -> None:
        try:
            started.append(launch_controller(cluster, "--ovn-timeout=60"))
        except BaseException as exc:  # reported below
            failed.append(exc)

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    try:
        assert startup_records.seen.wait(30), startup_records.messages
        cluster.nb_server.start()
        thread.join(60)
        assert not failed, failed
        running(started[0])
        waits = [m for m in startup_records.messages if m.startswith("waiting for the OVN NB")]
        assert waits and all("retrying in" in m and "Error" not in m for m in waits)
        assert "the OVN NB at" in startup_records.messages[-1]
    finally:
        thread.join(60)
        for ctl in started:
            ctl.stop()
