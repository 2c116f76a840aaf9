"""Readiness probes for the sandbox kubelet.

A pod whose containers have a `readinessProbe` is Ready only once each probe has passed, as the
real kubelet's prober decides (pkg/kubelet/prober): the first run after `initialDelaySeconds`,
then every `periodSeconds` (default 10); Ready after `successThreshold` passes in a row (default
1), not Ready again after `failureThreshold` failures in a row (default 3). A container without a
probe is ready once running.

`HostProber(wiring)` runs a probe where the stand-in can: an `exec` probe runs its command with
the host's binaries inside the pod's network namespace (`wiring.pod_netns(pod)`), a `tcpSocket`
or `httpGet` probe connects from the node's network namespace (`wiring.node_netns(node)`) to the
pod's IP, as the kubelet probes from the node. A wiring without those namespaces (`NoWiring`: the
API-only test bed has no pod to reach) cannot evaluate a probe; it counts as passed, so pods there
are Ready once running. `ProbeResult.message` is what the kubelet puts in its `Unhealthy` Event.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from controller.sandbox.cluster.cniwait import text

PROBE_TIMEOUT_DEFAULT = 1
OUTPUT_LIMIT = 500

#: Connects (tcp) or GETs (http) from inside the node's namespace; exit 0 on success.
_CONNECT = """
import socket, sys, urllib.request
kind, host, port, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
timeout = float(sys.argv[5])
if kind == "tcp":
    socket.create_connection((host, port), timeout=timeout).close()
else:
    h = f"[{host}]" if ":" in host else host
    with urllib.request.urlopen(f"http://{h}:{port}{path}", timeout=timeout) as r:
        sys.exit(0 if 200 <= r.status < 400 else 1)
"""

Runner = Callable[[Sequence[str], float], "tuple[int, str]"]


@dataclass(frozen=True, slots=True)
class ProbeResult:
    ok: bool
    message: str = ""


class Prober(Protocol):
    def probe(
        self, pod: Mapping[str, Any], container: Mapping[str, Any], probe: Mapping[str, Any]
    ) -> ProbeResult: ...


@dataclass(frozen=True, slots=True)
class ProbeTiming:
    initial_delay: float
    period: float
    success_threshold: int
    failure_threshold: int

    @classmethod
    def of(cls, probe: Mapping[str, Any]) -> ProbeTiming:
        def number(key: str, default: int, least: int) -> int:
            value = probe.get(key)
            return value if isinstance(value, int) and value >= least else default

        return cls(
            float(number("initialDelaySeconds", 0, 0)),
            float(number("periodSeconds", 10, 1)),
            number("successThreshold", 1, 1),
            number("failureThreshold", 3, 1),
        )


def readiness_probes(pod: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """(container, probe) for each container of `pod` that has a readiness probe."""
    out = []
    for container in (pod.get("spec") or {}).get("containers") or []:
        if isinstance(container, Mapping) and isinstance(container.get("readinessProbe"), Mapping):
            out.append((container, container["readinessProbe"]))
    return out


def _run(argv: Sequence[str], timeout: float) -> tuple[int, str]:
    try:
        done = subprocess.run(
            list(argv), capture_output=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return -1, f"command timed out after {timeout:g}s"
    except OSError as exc:
        return -1, str(exc)
    output = (done.stdout + done.stderr).decode(errors="replace").strip()
    return done.returncode, output[:OUTPUT_LIMIT]


class HostProber:
    """Runs probes from the host (module docstring); `runner` runs one argv with a timeout."""

    def __init__(self, wiring: object, runner: Runner = _run) -> None:
        self._wiring = wiring
        self._runner = runner

    def probe(
        self, pod: Mapping[str, Any], container: Mapping[str, Any], probe: Mapping[str, Any]
    ) -> ProbeResult:
        raw_timeout = probe.get("timeoutSeconds")
        timeout = float(raw_timeout) if isinstance(raw_timeout, int) and raw_timeout > 0 else 1.0
        command = (probe.get("exec") or {}).get("command")
        if isinstance(command, list) and command:
            pod_netns = getattr(self._wiring, "pod_netns", None)
            if not callable(pod_netns):
                return ProbeResult(True)
            argv = ["ip", "netns", "exec", str(pod_netns(pod)), *map(str, command)]
            code, output = self._runner(argv, timeout)
            return ProbeResult(code == 0, output if code else "")
        for kind, key in (("tcp", "tcpSocket"), ("http", "httpGet")):
            action = probe.get(key)
            if isinstance(action, Mapping):
                return self._connect(pod, container, kind, action, timeout)
        return ProbeResult(True)  # a probe of a kind the stand-in cannot run (grpc)

    def _connect(
        self,
        pod: Mapping[str, Any],
        container: Mapping[str, Any],
        kind: str,
        action: Mapping[str, Any],
        timeout: float,
    ) -> ProbeResult:
        node_netns = getattr(self._wiring, "node_netns", None)
        host = text(action, "host") or text(pod, "status", "podIP")
        port = _port(container, action.get("port"))
        if not callable(node_netns):
            return ProbeResult(True)
        if not host or port is None:
            return ProbeResult(False, f"no address to probe (host {host!r}, port {port!r})")
        path = text(action, "path") or "/"
        argv = [
            "ip", "netns", "exec", str(node_netns(text(pod, "spec", "nodeName"))),
            sys.executable, "-c", _CONNECT, kind, host, str(port), path, str(timeout),
        ]  # fmt: skip
        code, output = self._runner(argv, timeout + 1)
        if code == 0:
            return ProbeResult(True)
        target = f"{host}:{port}" if kind == "tcp" else f"http://{host}:{port}{path}"
        last = output.splitlines()[-1] if output else f"exit {code}"
        return ProbeResult(
            False, f"Get {target!r}: {last}" if kind == "http" else f"dial tcp {target}: {last}"
        )


def _port(container: Mapping[str, Any], port: object) -> int | None:
    if isinstance(port, int):
        return port
    for declared in container.get("ports") or []:
        if isinstance(declared, Mapping) and declared.get("name") == port:
            value = declared.get("containerPort")
            return value if isinstance(value, int) else None
    return None


@dataclass(slots=True)
class _Counter:
    timing: ProbeTiming
    due: float
    ready: bool = False
    successes: int = 0
    failures: int = 0


class Readiness:
    """The readiness of one running pod: its containers' probe counters (module docstring)."""

    def __init__(self, uid: str, pod: Mapping[str, Any], started: float) -> None:
        self.uid = uid
        self._counters = {
            text(container, "name"): _Counter(timing, started + timing.initial_delay)
            for container, probe in readiness_probes(pod)
            for timing in (ProbeTiming.of(probe),)
        }

    @property
    def ready(self) -> bool:
        return all(c.ready for c in self._counters.values())

    def next_due(self) -> float | None:
        return min((c.due for c in self._counters.values()), default=None)

    def run_due(self, pod: Mapping[str, Any], prober: Prober, now: float) -> list[str]:
        """Run the probes that are due; returns the failure messages."""
        failures = []
        for container, probe in readiness_probes(pod):
            counter = self._counters.get(text(container, "name"))
            if counter is None or counter.due > now:
                continue
            counter.due = now + counter.timing.period
            result = prober.probe(pod, container, probe)
            if result.ok:
                counter.successes, counter.failures = counter.successes + 1, 0
                if counter.successes >= counter.timing.success_threshold:
                    counter.ready = True
            else:
                counter.successes, counter.failures = 0, counter.failures + 1
                if counter.failures >= counter.timing.failure_threshold:
                    counter.ready = False
                failures.append(result.message)
        return failures
