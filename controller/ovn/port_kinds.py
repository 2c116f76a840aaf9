"""Which logical switch ports this controller creates, and so may ever delete (pure).

kube-ovn marks many ports `external_ids:vendor=kube-ovn`: the pod and node ports this controller
writes, but also each subnet's router link (type router), an underlay subnet's uplink
`localnet.<subnet>` (type localnet), interconnection transit ports (type router or remote) and
ports of components not ported here. The garbage collector and the audit judge only the first
kind, by type and by name: a VIF (type "") named `node-<node>` or `<pod>.<ns>[.<provider>]`.
Every other port is left alone, whatever its external_ids say.
"""

from __future__ import annotations

from controller.core.constants import LOCALNET_PORT_PREFIX, NODE_PORT_PREFIX
from controller.ovn.api import PortInfo


def is_controller_port(port: PortInfo) -> bool:
    """Is `port` a pod or node port as this controller creates them?"""
    if port.type or "router" in port.addresses:
        return False
    if port.name.startswith(LOCALNET_PORT_PREFIX):
        return False
    if port.name.startswith(NODE_PORT_PREFIX):
        return len(port.name) > len(NODE_PORT_PREFIX)
    pod, _, namespace = port.name.partition(".")
    return bool(pod) and bool(namespace.split(".", 1)[0])
