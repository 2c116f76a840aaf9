"""handleDeletePod: cleanup, same-name re-creation, tombstones, once-only, delayed terminations,
StatefulSet keep-IP."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

from controller.cache import DeletedFinalStateUnknown
from controller.core.object_fields import format_time
from tests.pod.env import NODE, NODE_JOIN_IP, Env, cached, raw_pod

EIP = "ovn.kubernetes.io/eip"


def allocated(env: Env, name: str, **kw: Any) -> dict[str, Any]:
    env.create_pod(raw_pod(name, node=NODE, **kw))
    env.converge()
    return copy.deepcopy(env.kube.pods[f"default/{name}"])


def assert_released(env: Env, name: str) -> None:
    assert env.nb.get_port(f"{name}.default") is None
    assert f"{name}.default" not in env.kube.ips
    assert env.ipam.get_pod_address(f"default/{name}") == []


def test_delete_removes_everything(env: Env) -> None:
    allocated(env, "web", annotations={EIP: "172.56.0.9"})
    env.configmaps.add(
        {
            "metadata": {"name": "ovn-external-gw-config", "namespace": "kube-system"},
            "data": {"external-gw-addr": "172.56.0.1"},
        }
    )
    env.advance(1)
    env.converge()
    assert env.routes() and env.nats()
    env.remove_pod("default/web")
    assert env.drain(env.queues.delete) == ["default/web"]
    env.controller.handle_delete_pod("default/web")
    assert_released(env, "web")
    assert env.routes() == [] and env.nats() == []
    assert env.controller.pending_deletes() == {}


def test_same_name_recreated_pod_keeps_its_address(env: Env) -> None:
    allocated(env, "web")
    env.remove_pod("default/web")  # delete queued, not yet handled
    env.create_pod(raw_pod("web", node=NODE))  # new uid, same name
    env.controller.handle_delete_pod("default/web")  # the old incarnation's delete
    assert env.nb.get_port("web.default") is not None
    assert env.ipam.get_pod_address("default/web") != []
    env.converge()
    got = env.annotations("default/web")
    assert got["ovn.kubernetes.io/allocated"] == "true"
    assert got["ovn.kubernetes.io/ip_address"] == "10.16.0.2"
    assert env.nb.get_port("web.default") is not None
    assert "web.default" in env.kube.ips
    assert env.routes() == [("src-ip", "10.16.0.2", NODE_JOIN_IP)]
    assert env.controller.pending_deletes() == {}


def test_tombstone_with_its_last_state(env: Env) -> None:
    last = allocated(env, "web")
    env.kube.pods.pop("default/web")
    env.pods.delete(env.pods.get_by_key("default/web"))
    env.pod_events.on_delete(DeletedFinalStateUnknown("default/web", last))
    env.converge()
    assert_released(env, "web")


def test_tombstone_without_object_cleans_up_by_name(env: Env) -> None:
    allocated(env, "web")
    env.kube.pods.pop("default/web")
    env.pods.delete(env.pods.get_by_key("default/web"))
    env.pod_events.on_delete(DeletedFinalStateUnknown("default/web", None))
    env.converge()
    assert_released(env, "web")
    assert env.routes() == []


def test_tombstone_without_object_leaves_a_live_pod_alone(env: Env) -> None:
    allocated(env, "web")
    env.pod_events.on_delete(DeletedFinalStateUnknown("default/web", None))
    env.converge()
    assert env.nb.get_port("web.default") is not None


def test_malformed_objects_are_ignored(env: Env) -> None:
    env.pod_events.on_add({"metadata": {"name": 5}}, False)
    env.pod_events.on_update({"metadata": "x"}, {"metadata": "y"})
    env.pod_events.on_delete(DeletedFinalStateUnknown("a/b", {"metadata": []}))
    assert all(len(q) == 0 for q in env.queues.all())


def test_delete_runs_once_for_many_events(env: Env) -> None:
    allocated(env, "web")
    before = env.nb.requests["delete_port"]

    def fail(obj: dict[str, Any]) -> None:
        obj["status"]["phase"] = "Failed"
        obj["spec"]["restartPolicy"] = "Never"

    env.edit_pod("default/web", fail)  # not alive -> delete
    env.edit_pod("default/web", lambda o: o["metadata"].setdefault("labels", {}).update(a="b"))
    env.remove_pod("default/web")  # and the delete event itself
    env.converge()
    assert env.nb.requests["delete_port"] - before == 1
    assert sum(c.startswith("delete_ip") for c in env.kube.calls) == 1
    assert_released(env, "web")
    # A late duplicate of the key finds nothing to do.
    env.queues.delete.add("default/web")
    env.converge()
    assert env.nb.requests["delete_port"] - before == 1


def test_terminating_pod_is_cleaned_up_after_its_grace_period(env: Env) -> None:
    allocated(env, "web", terminationGracePeriodSeconds=30)

    def terminate(obj: dict[str, Any]) -> None:
        obj["metadata"]["deletionTimestamp"] = format_time(env.now + timedelta(seconds=30))
        obj["metadata"]["deletionGracePeriodSeconds"] = 30

    env.edit_pod("default/web", terminate)
    assert len(env.queues.delete) == 0 and env.queues.delete.pending() == 1
    env.advance(29)
    env.converge()
    assert env.nb.get_port("web.default") is not None  # still within its grace period
    env.advance(1)
    env.converge()
    # The node is lost: the pod still exists, but its network is reclaimed.
    assert_released(env, "web")
    assert "default/web" in env.kube.pods


def test_an_early_delete_entry_waits_for_the_grace_period(env: Env) -> None:
    allocated(env, "web", terminationGracePeriodSeconds=60)

    def terminate(obj: dict[str, Any]) -> None:
        obj["metadata"]["deletionTimestamp"] = format_time(env.now + timedelta(seconds=60))

    env.edit_pod("default/web", terminate)
    env.queues.delete.add("default/web")  # e.g. an older delayed entry of the same key firing
    env.converge()
    assert env.nb.get_port("web.default") is not None
    env.advance(60)
    env.converge()
    assert_released(env, "web")


def test_statefulset_pod_keeps_its_network_while_the_sts_wants_it(env: Env) -> None:
    env.statefulsets.add(
        {"metadata": {"name": "db", "namespace": "default"}, "spec": {"replicas": 2}}
    )
    allocated(env, "db-1", owner=("apps/v1", "StatefulSet", "db"))

    def terminate(obj: dict[str, Any]) -> None:
        obj["metadata"]["deletionTimestamp"] = format_time(env.now)

    env.edit_pod("default/db-1", terminate)
    env.remove_pod("default/db-1")
    env.converge()
    assert env.nb.get_port("db-1.default") is not None
    assert "db-1.default" in env.kube.ips
    assert env.ipam.get_pod_address("default/db-1") != []
    assert env.routes() == []  # routes go even when the address is kept (kube-ovn)
    # The re-created pod gets the same address.
    env.create_pod(raw_pod("db-1", node=NODE, owner=("apps/v1", "StatefulSet", "db")))
    env.converge()
    assert env.annotations("default/db-1")["ovn.kubernetes.io/ip_address"] == "10.16.0.2"


def test_force_deleted_statefulset_pod_keeps_its_ip_cr_and_address(env: Env) -> None:
    # a force delete: the last state has no deletionTimestamp, so the port goes (kube-ovn), but
    # the IP CR is kept and so is the address it records (InitIPAM would restore it anyway)
    env.statefulsets.add(
        {"metadata": {"name": "db", "namespace": "default"}, "spec": {"replicas": 2}}
    )
    allocated(env, "db-1", owner=("apps/v1", "StatefulSet", "db"))
    ip = env.annotations("default/db-1")["ovn.kubernetes.io/ip_address"]
    env.remove_pod("default/db-1")
    env.converge()
    assert env.nb.get_port("db-1.default") is None
    assert env.kube.ips["db-1.default"]["spec"]["ipAddress"] == ip
    assert [a.ip for a in env.ipam.get_pod_address("default/db-1")] == [ip]
    allocated(env, "other")
    env.create_pod(raw_pod("db-1", node=NODE, owner=("apps/v1", "StatefulSet", "db")))
    env.converge()
    assert env.annotations("default/db-1")["ovn.kubernetes.io/ip_address"] == ip


def test_statefulset_scale_down_releases_the_network() -> None:
    from tests.pod.env import standard_env

    env = standard_env(with_owner_indexers=False)  # the sts is read through the API
    try:
        env.kube.add_statefulset(
            {"metadata": {"name": "db", "namespace": "default"}, "spec": {"replicas": 1}}
        )
        allocated(env, "db-1", owner=("apps/v1", "StatefulSet", "db"))
        env.edit_pod(
            "default/db-1",
            lambda o: o["metadata"].__setitem__("deletionTimestamp", format_time(env.now)),
        )
        env.remove_pod("default/db-1")
        env.converge()
        assert_released(env, "db-1")
    finally:
        env.close()


def test_vm_pod_keeps_its_ip_under_keep_vm_ip() -> None:
    from controller.config import Config
    from tests.pod.env import standard_env

    env = standard_env(config=Config(enable_keep_vm_ip=True))
    try:
        env.vms.add({"metadata": {"name": "vm1", "namespace": "default"}})
        owner = ("kubevirt.io/v1", "VirtualMachineInstance", "vm1")
        allocated(env, "virt-launcher-vm1-abc", owner=owner)
        assert env.nb.get_port("vm1.default") is not None
        assert env.kube.ips["vm1.default"]["spec"]["podType"] == "VirtualMachine"
        env.edit_pod(
            "default/virt-launcher-vm1-abc",
            lambda o: o["metadata"].__setitem__("deletionTimestamp", format_time(env.now)),
        )
        env.remove_pod("default/virt-launcher-vm1-abc")
        env.converge()
        assert env.nb.get_port("vm1.default") is not None
        env.create_pod(raw_pod("virt-launcher-vm1-xyz", node=NODE, owner=owner))
        env.converge()
        assert (
            env.annotations("default/virt-launcher-vm1-xyz")["ovn.kubernetes.io/ip_address"]
            == "10.16.0.2"
        )
    finally:
        env.close()


def test_informer_final_object_wins_over_a_handlers_older_copy(env: Env) -> None:
    env.statefulsets.add(
        {"metadata": {"name": "db", "namespace": "default"}, "spec": {"replicas": 2}}
    )
    env.create_pod(raw_pod("db-1", node=NODE, owner=("apps/v1", "StatefulSet", "db")))
    env.drain(env.queues.add)
    final = copy.deepcopy(env.kube.pods["default/db-1"])
    final["metadata"]["deletionTimestamp"] = format_time(env.now)
    env.kube.delete_pod("default", "db-1")
    env.pod_events.on_delete(final)  # the delete event arrives while the add is in flight
    env.controller.handle_add_pod("default/db-1")  # its patch finds the pod gone
    pending = env.controller.pending_deletes()["default/db-1"]
    assert pending["metadata"]["deletionTimestamp"]
    env.pods.delete(env.pods.get_by_key("default/db-1"))  # the cache catches up (event sent)
    env.advance(0.005)
    env.converge()
    # The final object says "terminating sts pod whose sts still wants it": keep the network.
    assert env.nb.get_port("db-1.default") is not None
    assert env.ipam.get_pod_address("default/db-1") != []


def test_a_pod_replaced_unseen_under_its_name_gets_its_own_add(env: Env) -> None:
    # A relist (the watch lost, the old resourceVersion compacted) shows a pod deleted and
    # re-created under its name as one update from the old incarnation to the new: the
    # informer never delivers the delete, nor an add. Here the old one's add was still queued,
    # so neither incarnation is allocated and their annotations are equal.
    env.create_pod(raw_pod("web", node=NODE))
    env.kube.pods.pop("default/web")
    env.kube.add_pod(raw_pod("web"))  # new uid, not scheduled yet
    old_uid = cached(env.pods, "default/web")["metadata"]["uid"]
    assert env.kube.pods["default/web"]["metadata"]["uid"] != old_uid
    env.process(env.queues.add)  # the old pod's add: its patch meets the new uid, rolled back
    assert env.sync("default/web")  # the relist's update, old -> new
    env.converge()
    got = env.annotations("default/web")
    assert got.get("ovn.kubernetes.io/allocated") == "true"
    assert env.nb.get_port("web.default") is not None
    assert env.kube.ips["web.default"]["spec"]["podName"] == "web"
    assert env.ipam.get_pod_address("default/web") != []
    assert env.controller.pending_deletes() == {}


def test_an_allocated_pod_replaced_unseen_keeps_one_address_for_its_successor(env: Env) -> None:
    # The same relist after the old incarnation was allocated: its cleanup (the delete the
    # watch never delivered) must spare the successor, which gets allocated.
    old = allocated(env, "web")
    env.kube.pods.pop("default/web")
    env.kube.add_pod(raw_pod("web", node=NODE))
    assert env.sync("default/web")
    env.converge()
    got = env.annotations("default/web")
    assert got.get("ovn.kubernetes.io/allocated") == "true"
    assert (
        got["ovn.kubernetes.io/ip_address"]
        == old["metadata"]["annotations"]["ovn.kubernetes.io/ip_address"]
    )
    assert env.nb.get_port("web.default") is not None
    assert len(env.pod_ports()) == 1
    assert env.controller.pending_deletes() == {}
