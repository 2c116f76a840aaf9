"""Fixtures of the real-control-plane tests: an admin client and a namespace per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from controller.sandbox.cluster.controlplane import RealControlPlane


@pytest.fixture
def admin(real_control_plane: RealControlPlane) -> Iterator[Any]:
    with real_control_plane.api_client() as api:
        yield api


@pytest.fixture
def namespace(admin: Any) -> Iterator[str]:
    """A fresh namespace, deleted (without waiting) at teardown."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(admin)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)
