"""Subnet spec normalisation: kube-ovn's `formatSubnet` (pkg/controller/subnet.go, v1.8).

`format_subnet_spec(name, spec)` returns a new dict: CIDR blocks normalised to their network
address, the gateway defaulted to the first address of each block and always added to
`excludeIps`, `protocol`, `provider` (`ovn`), `vpc` (`ovn-cluster`) and `gatewayType`
(`distributed`) defaulted. The booleans `default`, `natOutgoing` and `private` and the string
`gatewayNode` are filled in as false/empty when absent: kube-ovn v1.8.18's SubnetSpec
(pkg/apis/kubeovn/v1/types.go) serialises them without omitempty, so every Subnet kube-ovn has
written carries them, and `kubectl get subnet` shows them in its Private/NAT/Default columns.
Bad CIDRs or gateways raise `MalformedObjectError`. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.core.address import check_protocol, first_ip, parse_cidr, parse_ip
from controller.core.constants import DEFAULT_VPC, GATEWAY_TYPE_DISTRIBUTED, OVN_PROVIDER
from controller.core.errors import MalformedObjectError


def format_subnet_spec(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """kube-ovn `formatSubnet`: the normalised spec (a new dict; `spec` is not modified)."""
    out = dict(spec)
    cidr = spec.get("cidrBlock")
    if cidr is not None and not isinstance(cidr, str):
        raise MalformedObjectError(
            f"subnet {name}: spec.cidrBlock must be a string, not {type(cidr).__name__}"
        )
    if not cidr:
        raise MalformedObjectError(f"subnet {name}: spec.cidrBlock is required")
    networks = []
    for block in cidr.split(","):
        parsed = parse_cidr(block.strip())
        if parsed is None:
            raise MalformedObjectError(f"subnet {name}: {block!r} is not a valid CIDR")
        networks.append(parsed[1])
    out["cidrBlock"] = ",".join(str(n) for n in networks)
    gateway = spec.get("gateway") or ""
    if not isinstance(gateway, str):
        raise MalformedObjectError(f"subnet {name}: spec.gateway must be a string")
    if gateway:
        gateways = [g.strip() for g in gateway.split(",")]
        for gw in gateways:
            ip = parse_ip(gw)
            if ip is None or not any(ip in n for n in networks):
                raise MalformedObjectError(f"subnet {name}: gateway {gw!r} is not in {cidr}")
    else:
        gateways = [str(first_ip(n)) for n in networks]
    out["gateway"] = ",".join(gateways)
    excludes = spec.get("excludeIps") or []
    if not isinstance(excludes, list) or not all(isinstance(e, str) for e in excludes):
        raise MalformedObjectError(f"subnet {name}: spec.excludeIps must be a list of strings")
    excludes = list(excludes)
    for gw in gateways:
        if gw not in excludes:
            excludes.append(gw)
    out["excludeIps"] = excludes
    out["protocol"] = check_protocol(out["cidrBlock"])
    out["provider"] = spec.get("provider") or OVN_PROVIDER
    out["vpc"] = spec.get("vpc") or DEFAULT_VPC
    out["gatewayType"] = spec.get("gatewayType") or GATEWAY_TYPE_DISTRIBUTED
    for key, empty in (("default", False), ("natOutgoing", False), ("private", False)):
        out.setdefault(key, empty)
    out.setdefault("gatewayNode", "")
    return out
