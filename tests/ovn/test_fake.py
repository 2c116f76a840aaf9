"""FakeNbClient's own test hooks (its NB semantics are pinned by test_contract.py)."""

from __future__ import annotations

import dataclasses

import pytest

from controller.ovn.api import DuplicateAddressError, OvnNotFoundError, OvnTimeoutError, PortSpec
from controller.testing.fake_nb import FakeNbClient


def test_fail_next_raises_once_and_changes_nothing() -> None:
    nb = FakeNbClient()
    nb.ensure_logical_switch("ls", "", "10.0.0.0/24", "10.0.0.1", {})
    nb.fail_next("create_port", OvnTimeoutError("injected"))
    spec = PortSpec("p.ns", "ls", "00:00:00:00:00:01", ("10.0.0.2",))
    with pytest.raises(OvnTimeoutError, match="injected"):
        nb.create_port(spec)
    assert nb.get_port("p.ns") is None
    nb.create_port(spec)
    assert nb.get_port("p.ns") is not None
    assert nb.requests["create_port"] == 2
    assert nb.requests["ensure_logical_switch"] == 1


def test_failed_verb_leaves_state_untouched() -> None:
    nb = FakeNbClient()
    nb.ensure_logical_switch("ls", "", "10.0.0.0/24", "10.0.0.1", {})
    before = repr(nb.state)
    with pytest.raises(Exception, match="duplicate"):
        nb.create_ports(
            [
                PortSpec("a.ns", "ls", "00:00:00:00:00:01", ("10.0.0.2",)),
                PortSpec("b.ns", "ls", "00:00:00:00:00:02", ("10.0.0.2",)),
            ]
        )
    assert repr(nb.state) == before


def test_a_verb_failing_after_its_first_write_rolls_it_back() -> None:
    nb = FakeNbClient()
    before = repr(nb.state)
    with pytest.raises(OvnNotFoundError):
        nb.ensure_logical_switch("ls", "no-such-router", "10.0.0.0/24", "10.0.0.1", {})
    assert repr(nb.state) == before
    assert nb.list_logical_switches() == []


def test_an_address_freed_by_update_or_delete_can_be_taken() -> None:
    nb = FakeNbClient()
    nb.ensure_logical_switch("ls", "", "10.0.0.0/24", "10.0.0.1", {})
    nb.create_port(PortSpec("a.ns", "ls", "00:00:00:00:00:01", ("10.0.0.2",)))
    nb.create_port(PortSpec("a.ns", "ls", "00:00:00:00:00:01", ("10.0.0.3",)))
    nb.create_port(PortSpec("b.ns", "ls", "00:00:00:00:00:02", ("10.0.0.2",)))
    with pytest.raises(DuplicateAddressError, match=r"'a\.ns'"):
        nb.create_port(PortSpec("c.ns", "ls", "00:00:00:00:00:03", ("10.0.0.3",)))
    nb.delete_port("a.ns")
    nb.create_port(PortSpec("c.ns", "ls", "00:00:00:00:00:03", ("10.0.0.3",)))
    port = nb.get_port("c.ns")
    assert port is not None and port.addresses == ("00:00:00:00:00:03 10.0.0.3",)


def test_list_pod_ports_follows_updates_deletes_and_switch_removal() -> None:
    nb = FakeNbClient()
    nb.ensure_logical_switch("ls", "", "10.0.0.0/24", "10.0.0.1", {})
    a = PortSpec("a.ns", "ls", "00:00:00:00:00:01", ("10.0.0.2",), pod_name="a", pod_namespace="ns")
    nb.create_ports([a, dataclasses.replace(a, name="a2.ns", ips=("10.0.0.3",))])
    assert nb.list_pod_ports("a", "ns") == ["a.ns", "a2.ns"]
    nb.create_port(dataclasses.replace(a, pod_name="b"))  # the port now names pod ns/b
    assert nb.list_pod_ports("a", "ns") == ["a2.ns"]
    assert nb.list_pod_ports("b", "ns") == ["a.ns"]
    nb.delete_port("a2.ns")
    assert nb.list_pod_ports("a", "ns") == []
    nb.delete_logical_switch("ls")
    assert nb.list_pod_ports("b", "ns") == []
    assert nb.state.pod_ports == {}
