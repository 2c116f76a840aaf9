"""Hypothesis state machine over the IPAM facade.

Any interleaving of random / static allocations, releases and subnet updates must keep:

* one address per subnet held by at most one key (checked against a model built only from what
  the API returned, and against `get_pod_address`);
* the counts adding up (free + released + excluded + held = hosts, and `subnet_usage` matching
  what keys hold);
* excluded, network and broadcast addresses never coming out of random allocation;
* failed calls changing nothing.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from controller.ipam import IPAM, IPAMError
from controller.ipam.address import format_ip, ip_value, parse_cidr_block, parse_exclude

PODS = [f"ns/p{i}" for i in range(8)]
# Each subnet has a few specs it can be switched between (CIDR change, exclude change, family
# change). Blocks are tiny so that exhaustion, reuse and conflicts happen often.
SPECS: dict[str, list[tuple[str, list[str]]]] = {
    "dual": [
        ("10.0.0.0/29,fd00::/125", ["10.0.0.2..10.0.0.3", "fd00::5"]),
        ("10.0.0.0/28,fd00::/125", ["10.0.0.1", "10.0.0.9..10.0.0.20", "fd00::1..fd00::2"]),
        ("10.0.0.8/29,fd00::/124", ["fd00::9"]),
        ("10.0.0.0/29", ["10.0.0.6"]),
    ],
    "v4": [
        ("10.1.0.0/29", ["10.1.0.1"]),
        ("10.1.0.0/30", []),
    ],
}
CANDIDATES = (
    [f"10.0.0.{i}" for i in range(0, 18)]
    + [f"fd00::{i:x}" for i in range(0, 18)]
    + [f"10.1.0.{i}" for i in range(0, 9)]
)
MACS = ["", "", "00:00:00:00:00:01", "00:00:00:00:00:02"]


def excluded_or_edge(subnet_spec: tuple[str, list[str]], ip: str) -> bool:
    """True when `ip` must never come out of random allocation under this spec."""
    version, value = ip_value(ip)
    networks = parse_cidr_block(subnet_spec[0])
    net = networks[version]
    if value in (net.network, net.broadcast):
        return True
    return any(
        v == version and start <= value <= end
        for v, start, end in (parse_exclude(e) for e in subnet_spec[1])
    )


class IPAMMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ipam = IPAM(rng=random.Random(0))
        self.spec = {name: specs[0] for name, specs in SPECS.items()}
        for name, (cidr, excludes) in self.spec.items():
            self.ipam.add_or_update_subnet(name, cidr, excludes)
        # (subnet, ip) -> key, built only from successful return values.
        self.holder: dict[tuple[str, str], str] = {}

    def _record(self, pod: str, subnet: str, v4: str, v6: str) -> None:
        for key in [k for k, p in self.holder.items() if p == pod and k[0] == subnet]:
            del self.holder[key]
        for ip in (v4, v6):
            if ip:
                owner = self.holder.get((subnet, ip))
                assert owner is None, f"{ip} handed to {pod} while {owner} holds it"
                self.holder[(subnet, ip)] = pod

    def _snapshot(self) -> tuple[object, ...]:
        return (
            tuple(tuple(self.ipam.get_pod_address(p)) for p in PODS),
            tuple(self.ipam.subnet_usage(s) for s in SPECS),
        )

    @rule(
        pod=st.sampled_from(PODS),
        subnet=st.sampled_from(sorted(SPECS)),
        skipped=st.lists(st.sampled_from(CANDIDATES), max_size=3),
    )
    def random_allocation(self, pod: str, subnet: str, skipped: list[str]) -> None:
        before = self._snapshot()
        try:
            v4, v6, mac = self.ipam.get_random_address(pod, subnet, skipped)
        except IPAMError:
            assert self._snapshot() == before, "a failed random allocation changed state"
            return
        for ip in (v4, v6):
            if ip:
                assert ip not in skipped
                held_before = (subnet, ip) in self.holder and self.holder[(subnet, ip)] == pod
                if not held_before:
                    assert not excluded_or_edge(self.spec[subnet], ip), f"random gave {ip}"
        assert mac.startswith("00:00:00:") or mac in MACS
        self._record(pod, subnet, v4, v6)

    @rule(
        pod=st.sampled_from(PODS),
        subnet=st.sampled_from(sorted(SPECS)),
        ips=st.lists(st.sampled_from(CANDIDATES), min_size=1, max_size=2),
        mac=st.sampled_from(MACS),
    )
    def static_allocation(self, pod: str, subnet: str, ips: list[str], mac: str) -> None:
        before = self._snapshot()
        try:
            v4, v6, _ = self.ipam.get_static_address(pod, ",".join(ips), mac, subnet)
        except IPAMError:
            assert self._snapshot() == before, "a failed static allocation changed state"
            return
        for ip in ips:
            assert ip in (v4, v6)
        self._record(pod, subnet, v4, v6)

    @rule(pod=st.sampled_from(PODS))
    def release(self, pod: str) -> None:
        self.ipam.release_address_by_pod(pod)
        for key in [k for k, p in self.holder.items() if p == pod]:
            del self.holder[key]

    @rule(pod=st.sampled_from(PODS), subnet=st.sampled_from(sorted(SPECS)))
    def release_one_subnet(self, pod: str, subnet: str) -> None:
        self.ipam.release_address(pod, subnet)
        for key in [k for k, p in self.holder.items() if p == pod and k[0] == subnet]:
            del self.holder[key]

    @rule(data=st.data(), subnet=st.sampled_from(sorted(SPECS)))
    def update_subnet(self, data: st.DataObject, subnet: str) -> None:
        spec = data.draw(st.sampled_from(SPECS[subnet]))
        stale = self.ipam.add_or_update_subnet(subnet, spec[0], spec[1])
        self.spec[subnet] = spec
        for item in stale:
            assert self.holder.pop((subnet, item.ip)) == item.pod_key

    @invariant()
    def model_matches_ipam(self) -> None:
        actual = {(a.subnet, a.ip): pod for pod in PODS for a in self.ipam.get_pod_address(pod)}
        assert actual == self.holder

    @invariant()
    def internal_consistency(self) -> None:
        assert self.ipam.verify() == []

    @invariant()
    def usage_matches_holdings(self) -> None:
        for subnet in SPECS:
            usage = self.ipam.subnet_usage(subnet)
            held = [ip for (s, ip) in self.holder if s == subnet]
            assert usage.v4_used == sum(":" not in ip for ip in held)
            assert usage.v6_used == sum(":" in ip for ip in held)


IPAMMachine.TestCase.settings = settings(max_examples=120, stateful_step_count=40, deadline=None)
TestIPAMMachine = IPAMMachine.TestCase


@st.composite
def subnet_specs(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A small v4 or v6 block and exclude entries in, across and outside it."""
    v6 = draw(st.booleans())
    prefix = draw(st.integers(122, 127) if v6 else st.integers(26, 31))
    size = 1 << ((128 if v6 else 32) - prefix)
    base = "fd00::" if v6 else "10.9.0.0"
    _, base_value = ip_value(base)

    def text(offset: int) -> str:
        return format_ip(6 if v6 else 4, base_value + offset)

    excludes = []
    for _ in range(draw(st.integers(0, 5))):
        a = draw(st.integers(0, size + 4))
        b = draw(st.integers(a, size + 8))
        excludes.append(text(a) if a == b else f"{text(a)}..{text(b)}")
    return f"{base}/{prefix}", excludes


@settings(max_examples=80, deadline=None)
@given(subnet_specs())
def test_random_allocation_exhausts_exactly_the_available_addresses(
    spec: tuple[str, list[str]],
) -> None:
    cidr, excludes = spec
    im = IPAM(rng=random.Random(0))
    im.add_or_update_subnet("s", cidr, excludes)
    usage = im.subnet_usage("s")
    available = usage.v4_available + usage.v6_available
    got: list[str] = []
    while True:
        try:
            v4, v6, _ = im.get_random_address(f"p{len(got)}", "s")
        except IPAMError as exc:
            assert exc.reason == "NoAvailableAddress"
            break
        got.append(v4 or v6)
        assert len(got) <= available
    assert len(got) == available == len(set(got))
    assert not any(excluded_or_edge(spec, ip) for ip in got)
    assert im.verify() == []
