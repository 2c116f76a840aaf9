"""The pod controller's decisions, as pure functions over already-fetched objects (no I/O).

Each function mirrors one kube-ovn v1.8.18 `pkg/controller/pod.go` helper (named in its
docstring) so the handlers of `controller.pod.controller` only fetch, call these, and write.
Where kube-ovn does an API GET in the middle of a decision (StatefulSet / VirtualMachine owner
checks), the caller passes either the fetched object (`None` meaning NotFound) or a
zero-argument callable that is invoked lazily, at most once, exactly where kube-ovn would do the
GET.

The package is split by concern; this module re-exports every public name, so callers write
`from controller import pod_logic as pl` and `pl.<name>`:

* `classify`: liveness, owners, pod keys, and the informer callbacks' enqueue decisions
  (`classify_add`, `classify_update`, `classify_delete`, `needs_add_after_edit`);
* `networks`: the pod's default subnet, its multus attachments and its nets
  (`pod_attachment_requests` -> `get_pod_kubeovn_nets` -> `need_allocate_subnets`);
* `allocation`: `validate_pod_network`, `get_ns_available_subnets` candidates,
  `plan_address_request`, `validate_static_request`, `acquire_address` (IPAM);
* `plan`: `plan_net_allocation`, what the add does for one network (request, names, what to
  undo), which the handler only executes;
* `request_check`: `check_pod_request`, the whole request checked before the add allocates;
* `build`: after allocation, `build_pod_allocation` (vlan), `validate_pod_cidr`,
  `build_pod_annotations`, `build_ip_cr`, `build_port_spec` / `security_groups_to_sync`;
* `routing`: handleUpdatePod's `needs_update`; `routing_state`: the routing reconciler's rows;
* `deletion`: handleDeletePod's `is_replaced_by` -> `decide_delete` (with the owner rules of
  `controller.core.keep`) -> `ports_to_delete`, `annotations.attachment_providers_to_release`;
* `inspection`: `inspect_pod` -> remove `annotations.allocation_state_keys`.

Errors: `InvalidPodNetworkError` when the pod's own annotations are wrong (retrying cannot help),
`ResourceNotReadyError` when something the pod depends on (namespace annotation, subnet, NAD, vlan)
is missing or not ready yet, a plain `RetryableError` for a NAD whose config does not parse or a
subnet attached twice (both fixed by a cluster change). They carry kube-ovn's Event reason where
kube-ovn emits one; deviation: the failures to resolve a pod's networks that the pod or the user
caused carry `ValidatePodNetworkFailed`, where kube-ovn only logs them. The transient ones of
start-up (namespace not annotated yet) stay silent. Each module names its own deviations;
docs/deviations.md lists them all.
"""

from controller.core.errors import InvalidPodNetworkError, ResourceNotReadyError, RetryableError
from controller.core.keep import statefulset_ordinal
from controller.pod_logic.allocation import (
    AddressAllocator,
    AddressMode,
    AddressRequest,
    acquire_address,
    candidate_subnets,
    check_static_ip,
    get_node_internal_ip,
    plan_address_request,
    validate_pod_cidr,
    validate_pod_ip,
    validate_pod_network,
    validate_static_request,
)
from controller.pod_logic.build import (
    build_ip_cr,
    build_pod_allocation,
    build_pod_annotations,
    build_port_spec,
    security_groups_to_sync,
)
from controller.pod_logic.classify import (
    DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS,
    IGNORE,
    EnqueueDecision,
    PodAction,
    classify_add,
    classify_delete,
    classify_update,
    get_name_by_pod,
    get_pod_key,
    get_pod_type,
    is_pod_alive,
    is_statefulset_pod,
    is_vm_pod,
    need_allocate_subnets,
    needs_add_after_edit,
    release_due,
    security_changed,
    termination_delay,
)
from controller.pod_logic.deletion import (
    DeleteDecision,
    append_check_pod_to_del,
    decide_delete,
    is_replaced_by,
    is_statefulset_pod_to_del,
    is_vm_pod_to_del,
    ports_to_delete,
)
from controller.pod_logic.inspection import InspectResult, inspect_pod, may_need_inspection
from controller.pod_logic.networks import (
    check_default_net_subnet,
    default_ovn_net,
    get_ns_available_subnets,
    get_pod_attachment_nets,
    get_pod_default_subnet,
    get_pod_kubeovn_nets,
    is_ovn_provider,
    is_ovn_subnet,
    may_wait_for_network,
    pod_attachment_requests,
    waits_for_nad,
    waits_for_subnet,
)
from controller.pod_logic.plan import (
    Held,
    NetAllocationPlan,
    needs_namespace_subnets,
    plan_net_allocation,
)
from controller.pod_logic.request_check import (
    Refusal,
    check_pod_request,
    group_by_reason,
    owns_other,
    refusal_error,
)
from controller.pod_logic.routing import (
    external_gateway_next_hop,
    needs_reroute,
    needs_update,
    routes_with_add,
    src_ip_route_pairs,
    subnet_allow_policies,
)

__all__ = [
    "DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS",
    "IGNORE",
    "AddressAllocator",
    "AddressMode",
    "AddressRequest",
    "DeleteDecision",
    "EnqueueDecision",
    "Held",
    "InspectResult",
    "InvalidPodNetworkError",
    "NetAllocationPlan",
    "PodAction",
    "Refusal",
    "ResourceNotReadyError",
    "RetryableError",
    "acquire_address",
    "append_check_pod_to_del",
    "build_ip_cr",
    "build_pod_allocation",
    "build_pod_annotations",
    "build_port_spec",
    "candidate_subnets",
    "check_default_net_subnet",
    "check_pod_request",
    "check_static_ip",
    "classify_add",
    "classify_delete",
    "classify_update",
    "decide_delete",
    "default_ovn_net",
    "external_gateway_next_hop",
    "get_name_by_pod",
    "get_node_internal_ip",
    "get_ns_available_subnets",
    "get_pod_attachment_nets",
    "get_pod_default_subnet",
    "get_pod_key",
    "get_pod_kubeovn_nets",
    "get_pod_type",
    "group_by_reason",
    "inspect_pod",
    "is_ovn_provider",
    "is_ovn_subnet",
    "is_pod_alive",
    "is_replaced_by",
    "is_statefulset_pod",
    "is_statefulset_pod_to_del",
    "is_vm_pod",
    "is_vm_pod_to_del",
    "may_need_inspection",
    "may_wait_for_network",
    "need_allocate_subnets",
    "needs_add_after_edit",
    "needs_namespace_subnets",
    "needs_reroute",
    "needs_update",
    "owns_other",
    "plan_address_request",
    "plan_net_allocation",
    "pod_attachment_requests",
    "ports_to_delete",
    "refusal_error",
    "release_due",
    "routes_with_add",
    "security_changed",
    "security_groups_to_sync",
    "src_ip_route_pairs",
    "statefulset_ordinal",
    "subnet_allow_policies",
    "termination_delay",
    "validate_pod_cidr",
    "validate_pod_ip",
    "validate_pod_network",
    "validate_static_request",
    "waits_for_nad",
    "waits_for_subnet",
]
