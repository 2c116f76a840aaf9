"""In-memory IP address management with kube-ovn v1.8.18's semantics (pkg/ipam).

Pure logic, no I/O: the controller rebuilds the state at start-up (InitIPAM: one
`add_or_update_subnet` per Subnet, then one `get_static_address` per existing pod, IP CR and
node) and keeps it current from its handlers. `IPAM` is the thread-safe entry point.

Modules: `errors` (the error tree), `address` (string <-> int at the edge), `ip_range`
(`IPRangeList`, sorted merged ranges, O(log n)), `subnet` (per-subnet state), `ipam` (facade).

Behaviour kept from kube-ovn:

* random allocation is idempotent per key; a key's address listed in ``skipped_addrs`` is given
  back and replaced (the controller's node-IP skip loop relies on it);
* excluded, network and broadcast addresses never leave through random allocation; a static
  request may take an excluded address (the gateway included) but not the network or broadcast
  address (NoAvailableError);
* released addresses are reused only when no never-used address is left;
* an excluded address is never put back into circulation when released; an update of the
  exclude list drops released addresses that became excluded (kube-ovn fix 3205b88ea);
* a single-family static request on a dual-stack subnet gets a random partner of the other
  family; a request for a family the subnet lacks is NoAvailableError;
* MACs are ``00:00:00:XX:XX:XX``, unique per subnet; a requested MAC held by another key is a
  AddressConflictError; an unknown subnet is NoAvailableError (`SubnetNotFoundError` subclasses it);
* a CIDR or exclude-list change keeps every allocation that is still a host address of the new
  CIDR, including ones that became excluded.

The deliberate deviations from v1.8.18 are listed in docs/deviations.md (IPAM).

Hooks for later kube-ovn features, not built: the ip_pool annotation is served by the
controller calling `get_static_address` for each pool entry in order and skipping those for
which `is_ip_assigned_to_pod` is true (v1.8 semantics). A v1.12 IPPool CRD would add an
``ippool.py`` holding named `IPRangeList`s per subnet that restrict `lowest_not_in`; per-NIC keys
(v1.9) map onto the existing per-subnet keys by passing the NIC key as `pod_key`.
"""

from controller.ipam.errors import (
    AddressConflictError,
    InvalidAddressError,
    InvalidCIDRError,
    IPAMError,
    NoAvailableError,
    OutOfRangeError,
    SubnetNotFoundError,
)
from controller.ipam.ip_range import IPRange, IPRangeList
from controller.ipam.ipam import IPAM, Address, SubnetAddress
from controller.ipam.subnet import StaleAddress, SubnetUsage

__all__ = [
    "IPAM",
    "Address",
    "AddressConflictError",
    "IPAMError",
    "IPRange",
    "IPRangeList",
    "InvalidAddressError",
    "InvalidCIDRError",
    "NoAvailableError",
    "OutOfRangeError",
    "StaleAddress",
    "SubnetAddress",
    "SubnetNotFoundError",
    "SubnetUsage",
]
