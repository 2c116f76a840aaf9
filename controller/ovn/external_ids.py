"""kube-ovn's external_ids keys and naming rules for NB rows (pure; no I/O).

Both NbClient implementations build and read rows through these helpers, so the real client and
the fake agree on every key the controller (and kube-ovn tooling) looks for.
"""

from __future__ import annotations

from collections.abc import Iterable

from controller.core import security_group as core_sg
from controller.core.constants import DENY_ALL_SECURITY_GROUP

VENDOR_KEY = "vendor"
POD_KEY = "pod"
LS_KEY = "ls"
SECURITY_GROUPS_KEY = "security_groups"
ASSOCIATED_SG_PREFIX = "associated_sg_"

# Port group / address set external_ids written by kube-ovn's CreateSgPortGroup.
PG_TYPE_KEY = "type"
PG_TYPE_SECURITY_GROUP = "security_group"
PG_SG_KEY = "sg"
PG_NAME_KEY = "name"

#: kube-ovn's deny-all security group: every port with security groups is in its port group.
DENY_ALL_SG = DENY_ALL_SECURITY_GROUP


def associated_sg_key(sg: str) -> str:
    return f"{ASSOCIATED_SG_PREFIX}{sg}"


def sg_port_group_name(sg: str) -> str:
    """kube-ovn GetSgPortGroupName: "ovn.sg.<sg>" with every "-" replaced by "."."""
    return core_sg.port_group_name(sg)


def sg_port_group_ids(sg: str) -> dict[str, str]:
    """external_ids of a security group's port group (kube-ovn CreateSgPortGroup)."""
    return {PG_TYPE_KEY: PG_TYPE_SECURITY_GROUP, PG_SG_KEY: sg, PG_NAME_KEY: sg_port_group_name(sg)}


def sg_address_set_name(sg: str, family: str) -> str:
    """kube-ovn GetSgV4/V6AssociatedName: "ovn.sg.<sg>.associated.v4|v6", "-" -> "."."""
    if family not in ("v4", "v6"):
        raise ValueError(f"address family must be 'v4' or 'v6', not {family!r}")
    return core_sg.address_set_name(sg, "ip" + family[1])


def join_sgs(sgs: Iterable[str]) -> str:
    return ",".join(s for s in sgs if s)


def split_sgs(csv: str) -> list[str]:
    return [s for s in (p.strip() for p in csv.split(",")) if s]


def associated_sgs(external_ids: dict[str, str] | object) -> set[str]:
    """SGs a port row is associated with (associated_sg_<sg>=true)."""
    if not isinstance(external_ids, dict):
        return set()
    return {
        k[len(ASSOCIATED_SG_PREFIX) :]
        for k, v in external_ids.items()
        if k.startswith(ASSOCIATED_SG_PREFIX) and v == "true"
    }


def router_port_names(switch: str, router: str) -> tuple[str, str]:
    """(switch-side LSP, router-side LRP) names of a switch-router link, as kube-ovn names them."""
    return f"{switch}-{router}", f"{router}-{switch}"
