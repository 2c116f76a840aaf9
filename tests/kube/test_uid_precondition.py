"""The allocation patch's UID precondition, as both KubeApi implementations send it."""

from __future__ import annotations

import pytest

from controller.apiclient.errors import ConflictError
from controller.kube.api import annotation_merge_patch
from controller.testing.fake_kube import FakeKubeApi


def test_allocation_patch_only_applies_to_the_pod_it_was_computed_for_fake() -> None:
    assert annotation_merge_patch({"a": "1"}, uid="u1") == {
        "metadata": {"annotations": {"a": "1"}, "uid": "u1"}
    }
    assert annotation_merge_patch({"a": "1"}) == {"metadata": {"annotations": {"a": "1"}}}
    kube = FakeKubeApi()
    kube.add_pod({"metadata": {"name": "p", "namespace": "ns", "uid": "new"}})
    with pytest.raises(ConflictError):
        kube.patch_pod_annotations("ns", "p", {"a": "1"}, uid="old")
    patched = kube.patch_pod_annotations("ns", "p", {"a": "1"}, uid="new")
    assert patched["metadata"]["annotations"] == {"a": "1"}
    assert patched["metadata"]["uid"] == "new"
