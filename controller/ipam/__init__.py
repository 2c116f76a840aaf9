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
  ConflictError; an unknown subnet is NoAvailableError (`SubnetNotFoundError` subclasses it);
* a CIDR or exclude-list change keeps every allocation that is still a host address of the new
  CIDR, including ones that became excluded.

Deliberate deviations from v1.8.18 (each is a kube-ovn bug or a later kube-ovn behaviour):

1. Lowest-first allocation from sorted, merged ranges (kube-ovn v1.12+), not v1.8's "range
   rotation" order; released addresses are likewise reused lowest first.
2. All-or-nothing: a dual-stack or static request that fails for one family changes nothing
   (v1.8 keeps the v4 half of a "v4 ok, v6 conflict" request, and touches the MAC maps before
   validating the IP).
3. Replacing an address releases the old one: a static request for a new address of a family
   the key already holds, or a skipped address on the random path, gives the old address back
   (v1.8 leaks it in IPToPod). On the skip path only the skipped family is replaced; the other
   family and the MAC are kept (v1.8 releases both families and the MAC).
4. If every never-used address is skipped, released ones are tried before raising ConflictError
   (v1.8 raises at once).
5. A subnet update keeps still-fitting released addresses as released (v1.8 turns them back
   into never-used ones), and drops allocations that no longer fit, returning them as
   `StaleAddress` for the caller to report (v1.8 logs and keeps a stale mapping that the key's
   next random allocation would return although it is outside the CIDR). A key left with no
   address in the subnet loses its MAC there too (kube-ovn #2566, leftover map keys).
6. Parsing: "v6,v4" CIDR blocks are dual stack (v1.8 reads them as IPv6 only); two CIDRs or two
   requested IPs of one family are rejected; unparsable, mixed-family or reversed exclude
   entries are InvalidCIDRError (v1.8 drops them silently); an unparsable requested IP or MAC is
   `InvalidAddressError`. Returned addresses and MACs are canonical (compressed lower-case IPv6,
   upper-case MAC), not echoes of the input.
7. `get_pod_address` lists only subnets where the key holds something, in a stable order
   (v1.8 returns an empty entry for every subnet, in random map order).
8. `SubnetUsage` counts each address once (see its docstring).
9. One lock for the whole IPAM instead of an RWMutex plus per-subnet mutexes.

Hooks for later kube-ovn features, not built: the ip_pool annotation is served by the
controller calling `get_static_address` for each pool entry in order and skipping those for
which `is_ip_assigned_to_pod` is true (v1.8 semantics). A v1.12 IPPool CRD would add an
``ippool.py`` holding named `IPRangeList`s per subnet that restrict `lowest_not_in`; per-NIC keys
(v1.9) map onto the existing per-subnet keys by passing the NIC key as `pod_key`.
"""

from controller.ipam.errors import (
    ConflictError,
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
    "ConflictError",
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
