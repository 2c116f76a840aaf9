"""The sandbox kubelet does what the real kubelet does where the tiers can see it: graceful
termination (networked until the containers exit, deleted right after), readiness from the
readiness probe, sandbox re-creation after a failed CNI ADD, the kubelet's Event texts, and the
status fields and node Lease it writes (docs/real-nodes.md, the differences section)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from controller.sandbox.apiserver.server import ApiServer
from controller.sandbox.cluster.kubelet import SandboxKubelet
from controller.sandbox.cluster.probes import HostProber, ProbeResult
from controller.sandbox.cluster.wiring import NoWiring, WiringError
from controller.testing.clock import FakeClock
from controller.testing.wait import wait_for
from tests.sandbox.kubelet.conftest import NODES
from tests.sandbox.kubelet.helpers import (
    NS,
    RecordingWiring,
    allocation,
    events,
    gone,
    pod,
    running,
    stepping,
    synced,
    wait_for_events,
)

SANDBOX_FAILED = re.compile(
    r"^Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network "
    r'for sandbox "(?P<id>[0-9a-f]{64})": plugin type="kube-ovn" failed \(add\): (?P<cause>.*)$'
)


def conditions(p: Mapping[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in p["status"]["conditions"]}


def _ready(p: Mapping[str, Any]) -> bool:
    return conditions(p)["Ready"] == "True"


# ------------------------------------------------------------------------- termination


@pytest.mark.parametrize("sigterm_exit", [5.0])
def test_a_terminating_pod_keeps_its_network_until_its_containers_exit(
    server: ApiServer, kubelet: SandboxKubelet, clock: FakeClock, wiring: RecordingWiring
) -> None:
    server.store.create("pods", pod("slow", grace=30, annotations=allocation()))
    running(server, "slow")
    server.store.delete("pods", NS, "slow")
    synced(server, kubelet, "slow")
    assert wiring.unwired == []  # SIGTERM sent, the containers still run: still networked
    clock.step(4)
    assert synced(server, kubelet, "slow")["metadata"]["deletionTimestamp"]
    assert wiring.unwired == []
    clock.step(1)  # the containers exit: CNI DEL, then the pod object goes
    gone(server, "slow")
    assert wiring.unwired == ["slow"]


def test_a_pod_whose_containers_exit_on_sigterm_is_deleted_at_once(
    server: ApiServer, kubelet: SandboxKubelet, wiring: RecordingWiring
) -> None:
    server.store.create("pods", pod("prompt", grace=30, annotations=allocation()))
    running(server, "prompt")
    server.store.delete("pods", NS, "prompt")
    gone(server, "prompt")  # the clock never moves: no grace period waited out
    assert wiring.unwired == ["prompt"]
    deletes = [r for r in server.request_log if r.verb == "delete" and r.resource == "pods"]
    assert len(deletes) == 1  # the kubelet's grace-0 delete (the test deleted in the store)


def test_a_change_of_sigterm_behaviour_applies_to_the_next_deletion(
    server: ApiServer, kubelet: SandboxKubelet, clock: FakeClock, wiring: RecordingWiring
) -> None:
    kubelet.sigterm_exit = None  # from now on the containers ignore SIGTERM
    server.store.create("pods", pod("stubborn", grace=30, annotations=allocation()))
    running(server, "stubborn")
    server.store.delete("pods", NS, "stubborn")
    synced(server, kubelet, "stubborn")
    clock.step(29)
    assert synced(server, kubelet, "stubborn")["metadata"]["deletionTimestamp"]
    assert wiring.unwired == []  # still running, still networked
    clock.step(1)  # the grace period runs out: killed
    gone(server, "stubborn")
    assert wiring.unwired == ["stubborn"]


# ------------------------------------------------------------------------- readiness


class ScriptedProber:
    """Answers every probe with `result` (changed by the test); counts the calls."""

    def __init__(self) -> None:
        self.result = ProbeResult(False, "ping: sendto: Network unreachable")
        self.calls = 0
        self.lock = threading.Lock()

    def probe(
        self, pod: Mapping[str, Any], container: Mapping[str, Any], probe: Mapping[str, Any]
    ) -> ProbeResult:
        with self.lock:
            self.calls += 1
            return self.result


@pytest.fixture
def prober() -> ScriptedProber:
    return ScriptedProber()


@pytest.fixture
def probed_kubelet(
    server: ApiServer, clock: FakeClock, prober: ScriptedProber
) -> Iterator[SandboxKubelet]:
    api = server.api_client()
    kl = SandboxKubelet(api, NODES, clock=clock, prober=prober).start()
    try:
        yield kl
    finally:
        kl.stop()
        api.close()


PROBE = {"exec": {"command": ["ping", "-c1", "10.16.0.1"]}, "periodSeconds": 5}


def probed_pod(name: str) -> dict[str, Any]:
    p = pod(name, annotations=allocation())
    p["spec"]["containers"][0]["readinessProbe"] = PROBE
    return p


def test_a_pod_is_ready_only_once_its_readiness_probe_passes(
    server: ApiServer, probed_kubelet: SandboxKubelet, clock: FakeClock, prober: ScriptedProber
) -> None:
    server.store.create("pods", probed_pod("probed"))
    started = running(server, "probed")
    assert conditions(started)["Ready"] == conditions(started)["ContainersReady"] == "False"
    [unhealthy] = wait_for_events(server, "probed", "Unhealthy", 1)
    assert unhealthy["type"] == "Warning"
    assert unhealthy["message"] == "Readiness probe failed: ping: sendto: Network unreachable"
    prober.result = ProbeResult(True)
    ready = stepping(  # to the next period
        clock, lambda: (p := server.store.get("pods", NS, "probed")) and _ready(p) and p
    )
    assert all(s["ready"] for s in ready["status"]["containerStatuses"])


def test_a_pod_without_a_probe_is_ready_once_running(
    server: ApiServer, probed_kubelet: SandboxKubelet, prober: ScriptedProber
) -> None:
    server.store.create("pods", pod("plain", annotations=allocation()))
    assert conditions(running(server, "plain"))["Ready"] == "True"
    assert prober.calls == 0


class Runs:
    def __init__(self, code: int = 0, output: str = "") -> None:
        self.argvs: list[list[str]] = []
        self.code, self.output = code, output

    def __call__(self, argv: Sequence[str], timeout: float) -> tuple[int, str]:
        self.argvs.append(list(argv))
        return self.code, self.output


class Namespaces:
    def pod_netns(self, p: Mapping[str, Any]) -> str:
        return f"pod-{p['metadata']['name']}"

    def node_netns(self, node: str) -> str:
        return f"node-{node}"


def test_exec_probes_run_in_the_pods_namespace_and_tcp_from_the_nodes() -> None:
    runs = Runs(1, "no reply")
    prober = HostProber(Namespaces(), runs)
    p = probed_pod("x")
    p["status"] = {"podIP": "10.16.0.5"}
    container = p["spec"]["containers"][0]
    assert prober.probe(p, container, PROBE) == ProbeResult(False, "no reply")
    assert runs.argvs[-1] == ["ip", "netns", "exec", "pod-x", "ping", "-c1", "10.16.0.1"]
    tcp = {"tcpSocket": {"port": 8080}}
    assert not prober.probe(p, container, tcp).ok
    argv = runs.argvs[-1]
    assert argv[:4] == ["ip", "netns", "exec", "node-node-a"]
    assert argv[-5:-1] == ["tcp", "10.16.0.5", "8080", "/"]


def test_probes_the_wiring_cannot_reach_count_as_passed() -> None:
    runs = Runs(1)
    prober = HostProber(NoWiring(), runs)
    p = probed_pod("x")
    assert prober.probe(p, p["spec"]["containers"][0], PROBE).ok
    assert runs.argvs == []


# ------------------------------------------------------------------------- sandboxes


class FlakyCni:
    """CNI ADD fails `failures` times; records ADD and DEL in order."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: list[str] = []
        self.lock = threading.Lock()

    def wire(self, p: Mapping[str, Any]) -> None:
        with self.lock:
            self.calls.append("ADD")
            if self.failures:
                self.failures -= 1
                raise WiringError("wait network ready timeout: the controller is slow")

    def unwire(self, p: Mapping[str, Any]) -> None:
        with self.lock:
            self.calls.append("DEL")


def test_a_failed_cni_add_re_creates_the_sandbox(server: ApiServer, clock: FakeClock) -> None:
    cni = FlakyCni(2)
    api = server.api_client()
    with SandboxKubelet(api, NODES, wiring=cni, clock=clock, retry_base=1.0):
        server.store.create("pods", pod("flaky", annotations=allocation()))
        wait_for_events(server, "flaky", "FailedCreatePodSandBox", 1)
        # the retry is queued just after the Event is written: move time until it has run
        failed = stepping(clock, lambda: events(server, "flaky", "FailedCreatePodSandBox")[1:])
        stepping(clock, lambda: _phase(server, "flaky") == "Running")
        failed = events(server, "flaky", "FailedCreatePodSandBox")
    api.close()
    assert cni.calls == ["ADD", "DEL", "ADD", "DEL", "ADD"]
    ids = []
    for e in failed:
        m = SANDBOX_FAILED.match(e["message"])
        assert m, e["message"]
        assert m["cause"] == "wait network ready timeout: the controller is slow"
        ids.append(m["id"])
    assert len(set(ids)) == 2  # a new sandbox each time


def _phase(server: ApiServer, name: str) -> str:
    phase: str = (server.store.get("pods", NS, name).get("status") or {}).get("phase", "")
    return phase


# ------------------------------------------------------------------------- status fields


def test_status_fields_the_real_kubelet_writes(server: ApiServer, kubelet: SandboxKubelet) -> None:
    server.store.create("pods", pod("fields", annotations=allocation()))
    status = running(server, "fields")["status"]
    assert status["qosClass"] == "BestEffort"
    for container in status["containerStatuses"]:
        assert re.fullmatch(r"containerd://[0-9a-f]{64}", container["containerID"])
        assert re.fullmatch(r"docker\.io/library/\w+@sha256:[0-9a-f]{64}", container["imageID"])
    guaranteed = pod("guaranteed", annotations=allocation("10.16.0.6"))
    for container in guaranteed["spec"]["containers"]:
        container["resources"] = {"limits": {"cpu": "100m", "memory": "64Mi"}}
    server.store.create("pods", guaranteed)
    assert running(server, "guaranteed")["status"]["qosClass"] == "Guaranteed"


def test_nodes_report_pressure_conditions_and_renew_their_lease(
    server: ApiServer, clock: FakeClock
) -> None:
    api = server.api_client()
    with SandboxKubelet(api, NODES, clock=clock, lease_renew=0.05):
        node = server.store.get("nodes", None, "node-a")
        kinds = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert kinds == {
            "MemoryPressure": "False",
            "DiskPressure": "False",
            "PIDPressure": "False",
            "Ready": "True",
        }
        lease = wait_for(lambda: _lease(server, "node-a"), message="node-a's lease")
        assert lease["spec"]["holderIdentity"] == "node-a"
        assert lease["spec"]["leaseDurationSeconds"] == 40
        assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
        first = lease["spec"]["renewTime"]
        wait_for(
            lambda: (renewed := _lease(server, "node-a")) and renewed["spec"]["renewTime"] != first,
            message="a lease renewal",
        )
    api.close()


def _lease(server: ApiServer, name: str) -> dict[str, Any] | None:
    for lease in server.store.list("leases", "kube-node-lease"):
        if lease["metadata"]["name"] == name:
            found: dict[str, Any] = lease
            return found
    return None
