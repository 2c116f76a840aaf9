"""Fixtures for tests/kube: `harness` runs each contract test over every KubeApi implementation."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kube.helpers import FakeHarness, Harness

HARNESSES = ["fake"]


@pytest.fixture(params=HARNESSES)
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    h: Harness = FakeHarness()
    for ns in ("default", "ns1"):
        h.seed("namespaces", {"metadata": {"name": ns}})
    yield h
