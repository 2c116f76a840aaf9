"""RBAC: exactly what the controller uses, nothing with a wildcard, bound to its ServiceAccount.

`CONTROLLER_USAGE` is the controller's API usage (controller/kube/client.py's requests, the
informers' list+watch, leader election on a Lease and kube-ovn v1.8's ConfigMap), written out
by hand so a change of the chart shows here as a reviewed diff; tests/chart/test_rbac_usage.py
checks the same rules against the (verb, resource) pairs recorded from a running controller.
"""

from __future__ import annotations

import helm_python

from tests.chart.helpers import (
    CLUSTER,
    NAMESPACE,
    Permission,
    Rendered,
    rbac_permissions,
    render,
)

INFORMER = ("list", "watch")

# (apiGroup, resource) -> verbs, cluster-wide
CONTROLLER_USAGE: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "pods"): (*INFORMER, "patch"),
    ("", "namespaces"): (*INFORMER, "patch"),
    ("", "nodes"): (*INFORMER, "patch"),
    ("", "events"): ("list", "create", "patch"),
    ("kubeovn.io", "ips"): ("get", *INFORMER, "create", "update", "delete"),
    ("kubeovn.io", "subnets"): ("get", *INFORMER, "create", "update"),
    ("kubeovn.io", "subnets/status"): ("patch",),
    ("kubeovn.io", "security-groups"): INFORMER,
    ("kubeovn.io", "security-groups/status"): ("patch",),
    ("kubeovn.io", "vlans"): INFORMER,
    ("kubeovn.io", "vpcs"): ("get", *INFORMER, "create"),
    ("kubeovn.io", "vpcs/status"): ("update",),
    ("k8s.cni.cncf.io", "network-attachment-definitions"): ("get", *INFORMER),
    ("apps", "statefulsets"): ("get", *INFORMER),
    ("kubevirt.io", "virtualmachines"): ("get", *INFORMER),
}
LEASE = "kube-ovn-controller"
RULE_LISTS = ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs")


def _expected(namespace: str = NAMESPACE, lease: str = LEASE) -> set[Permission]:
    want = {
        Permission(CLUSTER, group, resource, verb)
        for (group, resource), verbs in CONTROLLER_USAGE.items()
        for verb in verbs
    }
    want |= {Permission(namespace, "", "configmaps", verb) for verb in INFORMER}
    want.add(Permission(namespace, "coordination.k8s.io", "leases", "create"))
    want |= {
        Permission(namespace, "coordination.k8s.io", "leases", verb, (lease,))
        for verb in ("get", "update")
    }
    # kube-ovn v1.8's leader lock, held together with the Lease
    want.add(Permission(namespace, "", "configmaps", "create"))
    want |= {Permission(namespace, "", "configmaps", v, ("ovn-config",)) for v in ("get", "update")}
    return want


def test_rules_grant_exactly_the_controllers_usage(default_render: Rendered) -> None:
    assert rbac_permissions(default_render.manifests) == _expected()


def test_lease_rule_follows_the_lease_name_and_release_namespace(
    chart: helm_python.Chart,
) -> None:
    values = {"config": {"leader-elect-resource-name": "pod-controller"}}
    rendered = render(chart, values, namespace="net-system")
    assert rbac_permissions(rendered.manifests) == _expected("net-system", "pod-controller")


def test_no_wildcards_anywhere(chart: helm_python.Chart, default_render: Rendered) -> None:
    values = {"serviceMonitor": {"enabled": True}, "ovn": {"ssl": {"enabled": True}}}
    everything = render(chart, values)
    for rendered in (default_render, everything):
        roles = rendered.of_kind("ClusterRole") + rendered.of_kind("Role")
        assert len(roles) == 2
        for role in roles:
            for rule in role["rules"]:
                for field in RULE_LISTS:
                    for item in rule.get(field, []):
                        assert "*" not in item, f"{role['kind']} rule {rule}: wildcard in {field}"


def test_one_api_group_and_resource_per_cluster_rule(default_render: Rendered) -> None:
    # The form a comparison with recorded (verb, resource) usage reads without unions.
    rules = default_render.one("ClusterRole")["rules"]
    keys = []
    for rule in rules:
        assert len(rule["apiGroups"]) == 1 and len(rule["resources"]) == 1, rule
        assert rule["verbs"], rule
        assert len(set(rule["verbs"])) == len(rule["verbs"]), rule
        keys.append((rule["apiGroups"][0], rule["resources"][0]))
    assert len(set(keys)) == len(keys)


def test_bindings_tie_roles_to_the_service_account(default_render: Rendered) -> None:
    account = default_render.one("ServiceAccount")["metadata"]
    pod = default_render.one("Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["name"]
    for binding_kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = default_render.one(binding_kind)
        role = default_render.one(role_kind)
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": role["metadata"]["name"],
        }
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account["name"], "namespace": NAMESPACE}
        ]
    assert default_render.one("Role")["metadata"]["namespace"] == NAMESPACE
    assert default_render.one("RoleBinding")["metadata"]["namespace"] == NAMESPACE


def test_existing_service_account_is_bound(chart: helm_python.Chart) -> None:
    rendered = render(chart, {"serviceAccount": {"create": False, "name": "ovn"}})
    assert rendered.of_kind("ServiceAccount") == []
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        assert rendered.one(kind)["subjects"][0]["name"] == "ovn"


def test_rbac_off_renders_no_rbac(chart: helm_python.Chart) -> None:
    rendered = render(chart, {"rbac": {"create": False}})
    assert rbac_permissions(rendered.manifests) == set()
    assert not {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"} & set(rendered.kinds())
