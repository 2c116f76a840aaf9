"""Rule -> ACL translation (controller/core/security_group.py) against kube-ovn v1.8.18's match
shapes (pkg/ovs/ovn-nbctl.go createSgRuleACL / UpdateSgACL), and its validation."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.security_group import (
    Acl,
    RuleError,
    errors_message,
    plan_security_group,
    plan_status,
    rules_md5,
)

PG = "ovn.sg.web.a"


def rule(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "ipVersion": "ipv4",
        "protocol": "all",
        "priority": 1,
        "remoteType": "address",
        "remoteAddress": "10.0.0.0/24",
        "policy": "allow",
    }
    return {**base, **kw}


def one(direction: str, r: dict[str, Any], exists: tuple[str, ...] = ()) -> Acl:
    field = "ingressRules" if direction == "ingress" else "egressRules"
    plan = plan_security_group("web-a", {field: [r]}, exists.__contains__)
    assert not plan.errors, plan.errors
    (acl,) = plan.acls
    return acl


def error(r: dict[str, Any], exists: tuple[str, ...] = ()) -> str:
    plan = plan_security_group("web-a", {"ingressRules": [rule(), r]}, exists.__contains__)
    assert len(plan.acls) == 1, "the valid rule is still translated"
    (err,) = plan.errors
    assert err.where == "ingressRules[1]"
    return err.message


@pytest.mark.parametrize(
    ("direction", "r", "want"),
    [
        (
            "ingress",
            rule(protocol="icmp"),
            Acl(
                "to-lport",
                2299,
                f"outport==@{PG} && ip4 && ip4.src==10.0.0.0/24 && icmp4",
                "allow-related",
            ),
        ),
        (
            "egress",
            rule(protocol="icmp", ipVersion="ipv6", remoteAddress="fd00::/64", policy="drop"),
            Acl("from-lport", 2299, f"inport==@{PG} && ip6 && ip6.dst==fd00::/64 && icmp6", "drop"),
        ),
        (
            "ingress",
            rule(protocol="tcp", portRangeMin=80, portRangeMax=443, priority=200),
            Acl(
                "to-lport",
                2100,
                f"outport==@{PG} && ip4 && ip4.src==10.0.0.0/24 && 80<=tcp.dst<=443",
                "allow-related",
            ),
        ),
        (
            "egress",
            rule(protocol="udp", portRangeMin=53, portRangeMax=53, remoteAddress="10.0.0.10"),
            Acl(
                "from-lport",
                2299,
                f"inport==@{PG} && ip4 && ip4.dst==10.0.0.10 && 53<=udp.dst<=53",
                "allow-related",
            ),
        ),
        (
            "ingress",
            rule(protocol="all", remoteType="securityGroup", remoteSecurityGroup="db-x"),
            Acl(
                "to-lport",
                2299,
                f"outport==@{PG} && ip4 && ip4.src==$ovn.sg.db.x.associated.v4",
                "allow-related",
            ),
        ),
        (
            "egress",
            rule(ipVersion="ipv6", remoteType="securityGroup", remoteSecurityGroup="db-x"),
            Acl(
                "from-lport",
                2299,
                f"inport==@{PG} && ip6 && ip6.dst==$ovn.sg.db.x.associated.v6",
                "allow-related",
            ),
        ),
        (
            "ingress",
            rule(protocol="", remoteAddress="10.0.0.7/24"),  # "" is all; host bits dropped
            Acl(
                "to-lport", 2299, f"outport==@{PG} && ip4 && ip4.src==10.0.0.0/24", "allow-related"
            ),
        ),
        (
            "ingress",
            rule(ipVersion="ipv6", remoteAddress="FD00:0:0::1"),
            Acl("to-lport", 2299, f"outport==@{PG} && ip6 && ip6.src==fd00::1", "allow-related"),
        ),
    ],
)
def test_kube_ovn_match_shapes(direction: str, r: dict[str, Any], want: Acl) -> None:
    assert one(direction, r, ("db-x",)) == want


def test_allow_same_group_traffic_adds_the_2004_acls() -> None:
    plan = plan_security_group("web-a", {"allowSameGroupTraffic": True})
    assert set(plan.acls) == {
        Acl(
            "to-lport",
            2004,
            f"outport==@{PG} && ip4 && ip4.src==${PG}.associated.v4",
            "allow-related",
        ),
        Acl(
            "to-lport",
            2004,
            f"outport==@{PG} && ip6 && ip6.src==${PG}.associated.v6",
            "allow-related",
        ),
        Acl(
            "from-lport",
            2004,
            f"inport==@{PG} && ip4 && ip4.dst==${PG}.associated.v4",
            "allow-related",
        ),
        Acl(
            "from-lport",
            2004,
            f"inport==@{PG} && ip6 && ip6.dst==${PG}.associated.v6",
            "allow-related",
        ),
    }
    assert plan_security_group("web-a", {"allowSameGroupTraffic": False}).acls == ()
    assert plan.port_group == PG and plan.allow_same_group_traffic


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (rule(protocol="sctp"), "unknown protocol 'sctp' (want one of all, icmp, tcp, udp)"),
        (rule(protocol="TCP"), "unknown protocol 'TCP'"),
        (rule(policy="accept"), "policy 'accept' is not 'allow' or 'drop'"),
        (rule(ipVersion="4"), "ipVersion '4' is not 'ipv4' or 'ipv6'"),
        (rule(priority=0), "priority 0 is not in the range 1 to 200"),
        (rule(priority=201), "priority 201 is not in the range 1 to 200"),
        (rule(priority="5"), "priority must be an integer, not '5'"),
        (rule(priority=True), "priority must be an integer, not True"),
        (rule(remoteAddress="10.0.0.0/33"), "invalid CIDR '10.0.0.0/33' in remoteAddress"),
        (rule(remoteAddress="10.0.0"), "invalid IP address '10.0.0' in remoteAddress"),
        (rule(remoteAddress=""), "remoteAddress is empty"),
        (rule(remoteAddress="fd00::/64"), "remoteAddress 'fd00::/64' is not an ipv4 address"),
        (rule(remoteAddress="10.0.0.1 || 1"), "invalid IP address"),
        (rule(remoteType="cidr"), "remoteType 'cidr' is not 'address' or 'securityGroup'"),
        (
            rule(remoteType="securityGroup", remoteSecurityGroup="nobody"),
            "remote security group 'nobody' does not exist",
        ),
        (
            rule(remoteType="securityGroup", remoteSecurityGroup="kubeovn_deny_all"),
            "remote security group 'kubeovn_deny_all' does not exist",
        ),
        (
            rule(remoteType="securityGroup", remoteSecurityGroup="a && ip"),
            "remoteSecurityGroup: invalid security group name 'a && ip'",
        ),
        (rule(protocol="tcp"), "portRangeMin 0 is out of range (1 to 65535)"),
        (rule(protocol="udp", portRangeMin=1, portRangeMax=65536), "portRangeMax 65536 is out"),
        (rule(protocol="tcp", portRangeMin=90, portRangeMax=80), "portRangeMin 90 is greater"),
        ("allow all", "a rule must be an object, not 'allow all'"),
        (rule(policy="drop", priority=1), "same priority and match as ingressRules[0] but the"),
    ],
)
def test_bad_rules_are_named_and_left_out(bad: Any, message: str) -> None:
    assert error(bad).startswith(message)


def test_ports_are_ignored_for_icmp_and_all_as_in_kube_ovn() -> None:
    acl = one("ingress", rule(protocol="icmp", portRangeMin=99999))
    assert acl.match.endswith("&& icmp4")


def test_exact_duplicates_collapse() -> None:
    plan = plan_security_group("web-a", {"ingressRules": [rule(), rule()]})
    assert len(plan.acls) == 1 and not plan.errors


def test_spec_level_errors() -> None:
    plan = plan_security_group("web-a", {"ingressRules": "x", "allowSameGroupTraffic": "yes"})
    assert [str(e) for e in plan.errors] == [
        "spec: allowSameGroupTraffic must be a boolean, not 'yes'",
        "ingressRules: ingressRules must be a list, not 'x'",
    ]
    assert not plan.ok("ingress") and not plan.ok("egress")  # a spec error counts for both
    assert (
        plan_security_group("kubeovn_deny_all", {})
        .errors[0]
        .message.endswith("reserved for the built-in deny-all group")
    )
    assert plan_security_group("web-a", ["not", "a", "map"]).errors[0].where == "spec"
    assert plan_security_group("web-a", None).errors == ()


def test_status_and_md5() -> None:
    spec = {"ingressRules": [rule(), rule(protocol="sctp")], "egressRules": [rule()]}
    plan = plan_security_group("web-a", spec)
    status = plan_status(plan)
    assert status == {
        "portGroup": PG,
        "allowSameGroupTraffic": False,
        "ingressMd5": rules_md5(spec["ingressRules"]),
        "egressMd5": rules_md5(spec["egressRules"]),
        "ingressLastSyncSuccess": False,
        "egressLastSyncSuccess": True,
    }
    assert rules_md5([{"b": 1, "a": 2}]) == rules_md5([{"a": 2, "b": 1}])
    assert rules_md5(None) == rules_md5([])
    assert errors_message(plan.errors) == (
        "ingressRules[1]: unknown protocol 'sctp' (want one of all, icmp, tcp, udp)"
    )
    assert str(RuleError("egress", 3, "x")) == "egressRules[3]: x"


def test_remote_groups_are_listed_for_their_address_sets() -> None:
    spec = {
        "ingressRules": [rule(remoteType="securityGroup", remoteSecurityGroup="db")],
        "egressRules": [rule(remoteType="securityGroup", remoteSecurityGroup="cache")],
    }
    plan = plan_security_group("web-a", spec, {"db", "cache"}.__contains__)
    assert plan.remote_groups == ("cache", "db")
