"""`helpers.rewrite`, the e2e tests' read-modify-write: another writer landing between its read
and its write (the leader renewing its Lease, the kubelet writing a pod) costs a re-read, never
the test. The interleaving is forced: the first `change` writes the object itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.sandbox.apiserver.resources import ApiError
from controller.sandbox.apiserver.store import ObjectStore
from tests.e2e.helpers import rewrite

pytestmark = pytest.mark.e2e


@dataclass
class Server:
    store: ObjectStore = field(default_factory=ObjectStore)


def _lease(server: Server) -> None:
    server.store.create(
        "leases",
        {"metadata": {"name": "lock", "namespace": "kube-system"}, "spec": {"holderIdentity": "a"}},
    )


def test_a_write_between_the_read_and_the_write_is_a_conflict_without_rewrite() -> None:
    server = Server()
    _lease(server)
    lease = server.store.get("leases", "kube-system", "lock")
    server.store.patch("leases", "kube-system", "lock", {"spec": {"renewTime": "renewed"}})
    lease["spec"]["holderIdentity"] = "intruder"
    with pytest.raises(ApiError) as conflict:
        server.store.update("leases", lease, "kube-system")
    assert conflict.value.code == 409


def test_rewrite_reads_again_after_a_conflict_and_keeps_the_other_write() -> None:
    server = Server()
    _lease(server)
    calls: list[str] = []

    def intrude(lease: dict[str, Any]) -> None:
        if not calls:  # the leader renews right after our read
            server.store.patch("leases", "kube-system", "lock", {"spec": {"renewTime": "renewed"}})
        calls.append(lease["metadata"]["resourceVersion"])
        lease["spec"]["holderIdentity"] = "intruder"

    stored = rewrite(server, "leases", "kube-system", "lock", intrude)
    assert len(calls) == 2 and calls[0] != calls[1]  # the second change saw the renewal
    assert stored["spec"] == {"holderIdentity": "intruder", "renewTime": "renewed"}
    assert server.store.get("leases", "kube-system", "lock")["spec"] == stored["spec"]


def test_rewrite_raises_what_is_not_a_conflict() -> None:
    server = Server()
    with pytest.raises(ApiError) as missing:
        rewrite(server, "leases", "kube-system", "absent", lambda _: None)
    assert missing.value.code == 404
