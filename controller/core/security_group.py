"""SecurityGroup rules as OVN ACLs: validation and translation (pure: no I/O, no client library).

`plan_security_group(name, spec, sg_exists)` reads a `security-groups.kubeovn.io` spec (the
JSON the API server stores) and returns an `SgPlan`: the ACLs of the group's port group, the
remote groups whose address sets those ACLs name, and one `RuleError` per rule that cannot be
applied. A bad rule never stops the others: it is left out and reported with its place in the
spec (`ingressRules[2]`), so the reconciler can name it in a Warning Event and in the status.

The ACLs are kube-ovn v1.8.18's (`pkg/ovs/ovn-nbctl.go` createSgRuleACL / UpdateSgACL):

* an ingress rule is a `to-lport` ACL matching `outport==@<pg> && ip4 && ip4.src==<remote>`, an
  egress rule a `from-lport` ACL matching `inport==@<pg> && ip4 && ip4.dst==<remote>` (ip6 for
  ipVersion ipv6); `<remote>` is the rule's address or CIDR, or `$<address set>` of the remote
  group; then `icmp4`/`icmp6` or `<min><=tcp.dst<=<max>` (udp alike); protocol `all` adds
  nothing;
* priority `2300 - rule.priority` (rule priorities 1..200), `allow` -> `allow-related`,
  `drop` -> `drop`;
* allowSameGroupTraffic: per direction one ip4 and one ip6 `allow-related` ACL at 2004 naming the
  group's own associated address sets;
* every member also sits in the deny-all group (2003 drop), so what no rule allows is dropped.

Deliberate differences from kube-ovn v1.8.18, all about input it mishandles:

* an ipv6 rule naming a remote group uses that group's `.associated.v6` set (v1.8 always names
  the v4 set, so such a rule never matched);
* an unknown protocol or policy is an error (v1.8 turns an unknown protocol into "all traffic"
  and an unknown policy into drop); an empty protocol means `all`, as in v1.8;
* an address of the other family than ipVersion is an error (v1.8 writes an ACL OVN cannot
  parse); a CIDR with host bits set is written as its network (`10.0.0.7/24` -> `10.0.0.0/24`);
* two rules with the same direction, priority and match but different policies are an error
  for the later one (OVN would pick one of them arbitrarily); exact duplicates collapse;
* the md5 fields of the status hash the rules' JSON, not Go's structhash output.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from controller.core.address import parse_network
from controller.core.constants import (
    DENY_ALL_SECURITY_GROUP,
    SECURITY_GROUP_ALLOW_PRIORITY,
    SECURITY_GROUP_HIGHEST_PRIORITY,
)

INGRESS: Final = "ingress"
EGRESS: Final = "egress"
RULE_FIELDS: Final = {INGRESS: "ingressRules", EGRESS: "egressRules"}
TO_LPORT: Final = "to-lport"
FROM_LPORT: Final = "from-lport"

PROTOCOLS: Final = ("all", "icmp", "tcp", "udp")
POLICY_ALLOW: Final = "allow"
POLICY_DROP: Final = "drop"
REMOTE_ADDRESS: Final = "address"
REMOTE_SECURITY_GROUP: Final = "securityGroup"
IP_VERSIONS: Final = {"ipv4": ("ip4", 4), "ipv6": ("ip6", 6)}
RULE_PRIORITY_MIN: Final = 1
RULE_PRIORITY_MAX: Final = 200
PORT_MIN: Final = 1
PORT_MAX: Final = 65535


@dataclass(frozen=True, slots=True)
class Acl:
    """One ACL row of a port group, columns as ovn-nbctl acl-add writes them."""

    direction: str
    priority: int
    match: str
    action: str


@dataclass(frozen=True, slots=True)
class RuleError:
    """Why one rule (index >= 0), a whole rule list (index -1) or the spec was not applied."""

    direction: str  # INGRESS, EGRESS, or "" for the spec as a whole
    index: int
    message: str

    @property
    def where(self) -> str:
        if not self.direction:
            return "spec"
        if self.index < 0:
            return RULE_FIELDS[self.direction]
        return f"{RULE_FIELDS[self.direction]}[{self.index}]"

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass(frozen=True, slots=True)
class SgPlan:
    """What a SecurityGroup asks of OVN, and what in it cannot be done."""

    name: str
    port_group: str
    acls: tuple[Acl, ...]
    remote_groups: tuple[str, ...]  # groups whose address sets the ACLs name (sorted)
    errors: tuple[RuleError, ...]
    allow_same_group_traffic: bool
    ingress_md5: str
    egress_md5: str

    def ok(self, direction: str) -> bool:
        return not any(e.direction in (direction, "") for e in self.errors)


class _BadRule(Exception):
    pass


def port_group_name(sg: str) -> str:
    """kube-ovn GetSgPortGroupName: "ovn.sg.<sg>" with every "-" replaced by "."."""
    return f"ovn.sg.{sg}".replace("-", ".")


def address_set_name(sg: str, ip_suffix: str) -> str:
    """kube-ovn GetSgV4/V6AssociatedName for `ip4` / `ip6`."""
    family = {"ip4": "v4", "ip6": "v6"}[ip_suffix]
    return f"ovn.sg.{sg}.associated.{family}".replace("-", ".")


def check_sg_name(name: str) -> str | None:
    """An error message when `name` cannot name a security group's NB rows, else None."""
    if not name or any(c.isspace() or c in ',"$@&|=!<>()' for c in name):
        return f"invalid security group name {name!r}"
    return None


def rules_md5(rules: Any) -> str:
    """A stable digest of a rule list as stored (status ingressMd5 / egressMd5)."""
    text = json.dumps(rules if rules is not None else [], sort_keys=True, separators=(",", ":"))
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def same_group_acls(sg: str, direction: str) -> tuple[Acl, Acl]:
    """allowSameGroupTraffic: members may talk to each other over ip4 and ip6 (priority 2004)."""
    pg = port_group_name(sg)
    port, side, acl_dir = _sides(direction)

    def acl(ip: str) -> Acl:
        match = f"{port}==@{pg} && {ip} && {ip}.{side}==${address_set_name(sg, ip)}"
        return Acl(acl_dir, SECURITY_GROUP_ALLOW_PRIORITY, match, "allow-related")

    return acl("ip4"), acl("ip6")


def _sides(direction: str) -> tuple[str, str, str]:
    """(port field, remote side, ACL direction) of a rule direction."""
    if direction == INGRESS:
        return "outport", "src", TO_LPORT
    return "inport", "dst", FROM_LPORT


def _int(rule: Mapping[str, Any], key: str) -> int:
    value = rule.get(key, 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise _BadRule(f"{key} must be an integer, not {value!r}")
    return value


def _str(rule: Mapping[str, Any], key: str) -> str:
    value = rule.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _BadRule(f"{key} must be a string, not {value!r}")
    return value


def _remote_address(value: str, version: int, ip_version: str) -> str:
    text = value.strip()
    if not text:
        raise _BadRule("remoteAddress is empty (remoteType address needs an IP or a CIDR)")
    net = parse_network(text)
    if net is None:
        what = "CIDR" if "/" in text else "IP address"
        raise _BadRule(f"invalid {what} {value!r} in remoteAddress")
    addr = str(net) if "/" in text else str(net.network_address)
    if net.version != version:
        raise _BadRule(f"remoteAddress {value!r} is not an {ip_version} address")
    return addr


def rule_acl(
    sg: str, direction: str, rule: Any, sg_exists: Callable[[str], bool]
) -> tuple[Acl, str]:
    """The ACL of one rule and the remote group it names ("" for none); `_BadRule` if invalid."""
    if not isinstance(rule, Mapping):
        raise _BadRule(f"a rule must be an object, not {rule!r}")
    ip_version = _str(rule, "ipVersion")
    if ip_version not in IP_VERSIONS:
        raise _BadRule(f"ipVersion {ip_version!r} is not 'ipv4' or 'ipv6'")
    ip, version = IP_VERSIONS[ip_version]
    priority = _int(rule, "priority")
    if not RULE_PRIORITY_MIN <= priority <= RULE_PRIORITY_MAX:
        raise _BadRule(
            f"priority {priority} is not in the range {RULE_PRIORITY_MIN} to {RULE_PRIORITY_MAX}"
        )
    policy = _str(rule, "policy")
    if policy not in (POLICY_ALLOW, POLICY_DROP):
        raise _BadRule(f"policy {policy!r} is not 'allow' or 'drop'")
    protocol = _str(rule, "protocol") or "all"
    if protocol not in PROTOCOLS:
        raise _BadRule(f"unknown protocol {protocol!r} (want one of {', '.join(PROTOCOLS)})")
    port, side, acl_dir = _sides(direction)
    remote_type = _str(rule, "remoteType")
    remote_group = ""
    if remote_type == REMOTE_ADDRESS:
        remote = _remote_address(_str(rule, "remoteAddress"), version, ip_version)
    elif remote_type == REMOTE_SECURITY_GROUP:
        remote_group = _str(rule, "remoteSecurityGroup").strip()
        problem = check_sg_name(remote_group)
        if problem is not None:
            raise _BadRule(f"remoteSecurityGroup: {problem}")
        if remote_group == DENY_ALL_SECURITY_GROUP or not sg_exists(remote_group):
            raise _BadRule(f"remote security group {remote_group!r} does not exist")
        remote = f"${address_set_name(remote_group, ip)}"
    else:
        raise _BadRule(f"remoteType {remote_type!r} is not 'address' or 'securityGroup'")
    parts = [f"{port}==@{port_group_name(sg)}", ip, f"{ip}.{side}=={remote}"]
    if protocol == "icmp":
        parts.append("icmp4" if version == 4 else "icmp6")
    elif protocol in ("tcp", "udp"):
        low, high = _int(rule, "portRangeMin"), _int(rule, "portRangeMax")
        for key, value in (("portRangeMin", low), ("portRangeMax", high)):
            if not PORT_MIN <= value <= PORT_MAX:
                raise _BadRule(f"{key} {value} is out of range ({PORT_MIN} to {PORT_MAX})")
        if low > high:
            raise _BadRule(f"portRangeMin {low} is greater than portRangeMax {high}")
        parts.append(f"{low}<={protocol}.dst<={high}")
    action = "allow-related" if policy == POLICY_ALLOW else "drop"
    return Acl(acl_dir, SECURITY_GROUP_HIGHEST_PRIORITY - priority, " && ".join(parts), action), (
        remote_group
    )


def plan_security_group(
    name: str, spec: Any, sg_exists: Callable[[str], bool] | None = None
) -> SgPlan:
    """Translate a SecurityGroup spec (see the module docstring); `sg_exists` answers whether a
    remote group named by a rule exists (default: none does)."""
    exists = sg_exists if sg_exists is not None else (lambda _n: False)
    errors: list[RuleError] = []
    acls: dict[Acl, None] = {}
    by_match: dict[tuple[str, int, str], tuple[str, str]] = {}  # -> (action, where)
    remotes: set[str] = set()
    pg = port_group_name(name)
    raw: Mapping[str, Any] = spec if isinstance(spec, Mapping) else {}
    if spec is not None and not isinstance(spec, Mapping):
        errors.append(RuleError("", -1, f"spec must be an object, not {spec!r}"))
    problem = check_sg_name(name)
    if problem is None and name == DENY_ALL_SECURITY_GROUP:
        problem = f"{name!r} is reserved for the built-in deny-all group"
    if problem is not None:
        errors.append(RuleError("", -1, problem))
        return SgPlan(name, pg, (), (), tuple(errors), False, "", "")
    same = raw.get("allowSameGroupTraffic", False)
    if not isinstance(same, bool):
        errors.append(RuleError("", -1, f"allowSameGroupTraffic must be a boolean, not {same!r}"))
        same = False
    md5s: dict[str, str] = {}
    for direction, field in RULE_FIELDS.items():
        rules = raw.get(field)
        md5s[direction] = rules_md5(rules)
        if same:
            acls.update(dict.fromkeys(same_group_acls(name, direction)))
        if rules is None:
            continue
        if not isinstance(rules, list):
            errors.append(RuleError(direction, -1, f"{field} must be a list, not {rules!r}"))
            continue
        for index, rule in enumerate(rules):
            where = RuleError(direction, index, "").where
            try:
                acl, remote = rule_acl(name, direction, rule, exists)
            except _BadRule as exc:
                errors.append(RuleError(direction, index, str(exc)))
                continue
            key = (acl.direction, acl.priority, acl.match)
            seen = by_match.get(key)
            if seen is not None and seen[0] != acl.action:
                errors.append(
                    RuleError(
                        direction,
                        index,
                        f"same priority and match as {seen[1]} but the opposite policy",
                    )
                )
                continue
            by_match.setdefault(key, (acl.action, where))
            acls[acl] = None
            if remote:
                remotes.add(remote)
    return SgPlan(
        name=name,
        port_group=pg,
        acls=tuple(acls),
        remote_groups=tuple(sorted(remotes)),
        errors=tuple(errors),
        allow_same_group_traffic=same,
        ingress_md5=md5s[INGRESS],
        egress_md5=md5s[EGRESS],
    )


def acl_sort_key(acl: Acl) -> tuple[str, int, str, str]:
    return (acl.direction, -acl.priority, acl.match, acl.action)


def plan_status(plan: SgPlan) -> dict[str, Any]:
    """kube-ovn's status fields of a SecurityGroup after `plan` was applied."""
    return {
        "portGroup": plan.port_group,
        "allowSameGroupTraffic": plan.allow_same_group_traffic,
        "ingressMd5": plan.ingress_md5,
        "egressMd5": plan.egress_md5,
        "ingressLastSyncSuccess": plan.ok(INGRESS),
        "egressLastSyncSuccess": plan.ok(EGRESS),
    }


def errors_message(errors: Sequence[RuleError]) -> str:
    """One line naming every rejected rule (Event message, status condition message)."""
    return "; ".join(str(e) for e in errors)
