"""The printed report: figures side by side with their baselines from the same run."""

from __future__ import annotations

from bench.e2e.clients import Throughput
from bench.e2e.model import CLIENT_CPU, REAL_NAME
from bench.e2e.runs import REPLAYED, ControllerRun, Floor
from bench.e2e.startup import Startup

# --- report --------------------------------------------------------------------------------------


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


def print_throughput(
    n: int,
    ctl: ControllerRun,
    emu: Throughput,
    ovn: Throughput,
    plane: str = "emulator",
    floor: Floor | None = None,
) -> None:
    """One N's table; `plane` names the API side ("emulator", or "real" for kube-apiserver)."""
    c = ctl.result
    where = "" if plane == "emulator" else ", on the real control plane"
    print(
        f"\n== {n} pods (controller: startup to ready {ctl.ready_seconds:.2f}s, "
        f"RSS then {ctl.ready_rss:.0f} MiB{where})"
    )
    limit, short = (
        ("emulator limit", "ctl/emu") if plane == "emulator" else ("API limit", "ctl/api")
    )
    print(f"{'':34}{'controller':>12}{limit:>16}{'OVN limit':>12}{short:>9}{'ctl/ovn':>9}")
    rows = [
        ("pods/s to allocated", c.to_allocated, emu.to_allocated, ovn.to_allocated),
        ("pods/s to routed", c.to_routed, emu.to_routed, ovn.to_routed),
    ]
    for label, a, b, d in rows:
        print(f"{label:34}{a:12.1f}{b:16.1f}{d:12.1f}{_ratio(a, b):>9}{_ratio(a, d):>9}")
    lat = [
        ("p50 POST->allocated ms", c.p50_allocated, emu.p50_allocated),
        ("p99 POST->allocated ms", c.p99_allocated, emu.p99_allocated),
        ("p50 POST->routed ms", c.p50_routed, emu.p50_routed),
        ("p99 POST->routed ms", c.p99_routed, emu.p99_routed),
    ]
    for label, a, b in lat:
        print(f"{label:34}{a * 1000:12.0f}{b * 1000:16.0f}{'-':>12}{_ratio(a, b):>9}{'-':>9}")
    print(
        f"{'wall s (first POST to last routed)':34}{c.wall:12.2f}{emu.wall:16.2f}{ovn.wall:12.2f}"
    )
    for key, value in c.extra.items():
        other = emu.extra.get(key)
        tail = f"{other:16.2f}" if other is not None else ""
        print(f"{key:34}{value:12.2f}{tail}")
    own = c.extra["controller CPU ms/pod"]
    server = c.extra.get(f"{'emulator' if plane == 'emulator' else REAL_NAME} CPU ms/pod")
    if server:
        # The server does the same work per pod in every run, so this ratio moves far less with
        # the machine's speed than either figure: the one to compare across runs.
        print(f"{'controller CPU / server CPU':34}{own / server:12.2f}")
    api_replay, ovn_replay = emu.extra.get(CLIENT_CPU), ovn.extra.get(CLIENT_CPU)
    if api_replay is not None and ovn_replay is not None:
        print(f"{CLIENT_CPU:34}{'-':>12}{api_replay:16.2f}{ovn_replay:12.2f}")
        both = api_replay + ovn_replay
        print(
            f"{'  both replay clients ms/pod':34}{both:12.2f}"
            f"  (controller / that: {_ratio(own, both)})"
        )
    if floor is not None:
        bare = floor.api_ms + floor.ovn_ms
        print(
            f"bare libraries, one thread, {floor.n} pods: urllib3 POST ip + PATCH pod "
            f"{floor.api_ms:.2f} ms/pod, ovsdbapp one transaction {floor.ovn_ms:.2f} ms/pod, "
            f"sum {bare:.2f} (controller / that: {_ratio(own, bare)})"
        )
    print(f"controller API requests per pod (replayed in the {limit} unless marked):")
    for key, rate in ctl.per_pod.items():
        mark = "" if key in REPLAYED else "  (not replayed)"
        print(f"    {key:40}{rate:8.3f}{mark}")


def print_paced(runs: list[tuple[str, float, ControllerRun]]) -> None:
    """The paced runs: (plane, rate, run) each, the latency a pod sees when not queued."""
    print("\n== paced at half the controller's own maximum (pods/s to routed above)")
    print(
        f"{'':12}{'pods/s':>8}{'p50 alloc':>11}{'p99 alloc':>11}{'p50 routed':>12}"
        f"{'p99 routed':>12}{'CPU ms/pod':>12}"
    )
    for plane, rate, run in runs:
        c = run.result
        print(
            f"{plane:12}{rate:8.1f}{c.p50_allocated * 1000:9.0f}ms{c.p99_allocated * 1000:9.0f}ms"
            f"{c.p50_routed * 1000:10.0f}ms{c.p99_routed * 1000:10.0f}ms"
            f"{c.extra['controller CPU ms/pod']:12.2f}"
        )


def print_planes(
    n: int, emu: tuple[ControllerRun, Throughput], real: tuple[ControllerRun, Throughput]
) -> None:
    """The same burst on both API planes side by side, each with its own API limit."""
    (ectl, elim), (rctl, rlim) = emu, real
    e, r = ectl.result, rctl.result
    print(f"\n== {n} pods, both control planes (each limit measured on its own plane)")
    print(f"{'':40}{'emulator':>12}{'real plane':>12}{'real/emu':>10}")
    rows = [
        ("controller pods/s to allocated", e.to_allocated, r.to_allocated),
        ("controller pods/s to routed", e.to_routed, r.to_routed),
        ("API limit pods/s to allocated", elim.to_allocated, rlim.to_allocated),
        ("API limit pods/s to routed", elim.to_routed, rlim.to_routed),
        ("controller / API limit (routed)", e.to_routed / elim.to_routed,
         r.to_routed / rlim.to_routed),
        ("p50 POST->routed ms", e.p50_routed * 1000, r.p50_routed * 1000),
        ("p99 POST->routed ms", e.p99_routed * 1000, r.p99_routed * 1000),
        ("controller CPU ms/pod", e.extra["controller CPU ms/pod"],
         r.extra["controller CPU ms/pod"]),
        ("API server CPU ms/pod (controller run)", e.extra["emulator CPU ms/pod"],
         r.extra[f"{REAL_NAME} CPU ms/pod"]),
        ("controller startup to ready s", ectl.ready_seconds, rctl.ready_seconds),
    ]  # fmt: skip
    for label, a, b in rows:
        print(f"{label:40}{a:12.2f}{b:12.2f}{_ratio(b, a):>10}")
    print(f"(API server CPU on the real plane: {REAL_NAME})")


def print_startup(s: Startup, baseline: float | None) -> None:
    print(f"\n== start-up with {s.existing} existing pods (seeding took {s.seed_seconds:.1f}s)")
    base = (
        f" (empty cluster: {baseline:.2f}s, ratio {_ratio(s.ready_seconds, baseline)})"
        if baseline
        else ""
    )
    print(f"spawn to /readyz 200: {s.ready_seconds:.2f}s{base}")
    print(
        f"controller RSS at ready {s.rss_at_ready:.0f} MiB, peak {s.peak_rss:.0f} MiB, "
        f"CPU {s.cpu_seconds:.2f}s"
    )
    for label, secs in s.phases.items():
        print(f"    {label:48}{secs:8.2f}s")
    if s.migration_seconds:
        print(
            f"v1.8 src-ip routes of the {s.existing} pods replaced by router policies "
            f"{s.migration_seconds:.2f}s after /readyz (controller CPU meanwhile "
            f"{s.migration_cpu_seconds:.2f}s; {s.migrated_pods} pods queued for it)"
        )
