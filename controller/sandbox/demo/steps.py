"""The demo's steps on the cluster: seeding what a cluster has, creating the demo's namespace,
subnets and workloads once the controller is ready, and bringing up the data plane.
"""

from __future__ import annotations

import contextlib
import random
from pathlib import Path
from typing import Any

from controller.core.constants import IP_ADDRESS_ANNOTATION, LOGICAL_SWITCH_ANNOTATION
from controller.sandbox.apiserver.resources import ApiError
from controller.sandbox.cluster.wiring import WiringError
from controller.sandbox.demo.objects import (
    CONTROLLER_NAMESPACE,
    DEMO_CIDR,
    DEMO_NAMESPACE,
    DEMO_SUBNET,
    DEPLOYMENT,
    DUAL_CIDR,
    DUAL_POD,
    DUAL_SUBNET,
    EXTERNAL_GW_CONFIGMAP,
    NODES,
    STATEFULSET,
    STATEFULSET_REPLICAS,
    node_objects,
    object_meta,
    pod_objects,
    pod_spec,
    statefulset_object,
    subnet_objects,
)
from controller.sandbox.demo.real import RealDemoServer, create_workloads, deployment_object
from controller.sandbox.demo.session import DemoApi, Session
from controller.sandbox.demo.supervision import ControllerProcess, DemoError
from controller.sandbox.ovn.cni import CniWiring
from controller.sandbox.ovn.dataplane import DataPlane, missing_requirements


def create_if_absent(server: DemoApi, resource: str, obj: dict[str, Any]) -> None:
    try:
        server.store.create(resource, obj)
    except ApiError as exc:
        if exc.code != 409:
            raise


def has_join_address(node: Any) -> bool:
    annotations = ((node or {}).get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(IP_ADDRESS_ANNOTATION))


def seed_cluster(server: DemoApi) -> None:
    store = server.store
    for namespace in (CONTROLLER_NAMESPACE, "default"):
        create_if_absent(server, "namespaces", {"metadata": object_meta(namespace)})
    for node in node_objects():
        store.create("nodes", node)
    store.create(
        "configmaps",
        {
            "metadata": object_meta(EXTERNAL_GW_CONFIGMAP, CONTROLLER_NAMESPACE),
            "data": {"enable-external-gw": "false", "external-gw-addr": "172.18.0.1/16"},
        },
    )


def create_demo(
    session: Session, server: DemoApi, controller: ControllerProcess
) -> list[tuple[str, str]]:
    store = server.store
    store.create(
        "namespaces", {"metadata": object_meta(DEMO_NAMESPACE, labels={"purpose": "demo"})}
    )
    for subnet in subnet_objects():
        store.create("subnets", subnet)
    # Pods created before their subnet and namespace are wired would only be retried (and
    # log errors); a scheduler would not be faster than this anyway.
    for subnet in subnet_objects():
        session.wait_store(
            server,
            controller,
            "subnets",
            None,
            subnet["metadata"]["name"],
            lambda obj: bool(((obj or {}).get("spec") or {}).get("gateway")),
            "its gateway",
        )
    session.wait_store(
        server,
        controller,
        "namespaces",
        None,
        DEMO_NAMESPACE,
        lambda obj: (
            (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(
                LOGICAL_SWITCH_ANNOTATION
            )
            == DEMO_SUBNET
        ),
        f"its {LOGICAL_SWITCH_ANNOTATION} annotation",
    )
    if isinstance(server, RealDemoServer):
        # Real workloads: kube-controller-manager creates their pods, the scheduler binds.
        dual = pod_objects(0, "", seed=0)[-1]
        server.store.create("pods", dual)
        names = create_workloads(
            server.store,
            DEMO_NAMESPACE,
            deployment_object(DEPLOYMENT, DEMO_NAMESPACE, session.options.pods, pod_spec("")),
            statefulset_object(),
            session.options.timeout,
        )
        pods = [{"metadata": {"namespace": DEMO_NAMESPACE, "name": n}} for n in [*names, DUAL_POD]]
    else:
        sts = store.create("statefulsets", statefulset_object())
        seed = random.SystemRandom().getrandbits(64)
        pods = pod_objects(session.options.pods, sts["metadata"]["uid"], seed=seed)
        for pod in pods:
            store.create("pods", pod)
    session.say(
        f"created namespace {DEMO_NAMESPACE}, subnets {DEMO_SUBNET} ({DEMO_CIDR}) and "
        f"{DUAL_SUBNET} ({DUAL_CIDR})"
    )
    session.say(
        f"created {len(pods)} pods: Deployment-like {DEPLOYMENT} "
        f"({session.options.pods}), StatefulSet {STATEFULSET} ({STATEFULSET_REPLICAS}), "
        f"dual-stack {DUAL_POD} (1)"
    )
    return [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods]


def start_dataplane(
    session: Session,
    stack: contextlib.ExitStack,
    workdir: Path,
    nb_remote: str,
    server: DemoApi,
    controller: ControllerProcess,
) -> CniWiring | None:
    """The data plane with every node's ovn0 wired, or None (with the reason said)."""
    if not session.options.dataplane:
        session.say("data plane: off (--no-dataplane)")
        return None
    why = missing_requirements()
    if why:
        session.say(f"data plane: off ({why}); pods are not wired")
        return None
    dp = DataPlane(workdir / "dp", nb_remote)
    stack.callback(session.stop_step, "data plane", dp.stop)
    dp.start()
    wiring = CniWiring(dp)
    for name, _ in NODES:
        session.wait_store(
            server, controller, "nodes", None, name, has_join_address, "its join address"
        )
        try:
            wiring.wire_node(server.store.get("nodes", None, name))
        except WiringError as exc:
            raise DemoError(f"data plane: {exc}") from exc
    session.say(
        f"data plane up in {dp.startup_seconds:.2f}s (SB, ovn-northd, OVS netdev, "
        f"ovn-controller as chassis {dp.chassis}; nodes' ovn0 wired)"
    )
    return wiring
