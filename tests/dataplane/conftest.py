"""Fixtures of the packet tests: one cluster (emulator + NB + in-process controller, default and
join subnets dual stack) and one data plane for the whole session (`net`), so each test only
pays for its own pods. Tests use distinct
pod names and subnets and clean up what they would leave in the way of other tests.

The whole directory is skipped, with the reason, where a data plane cannot run (not root, or
the OVN/OVS packages missing: `.ci/setup` installs them).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.sandbox.ovn.dataplane import missing_requirements
from tests.dataplane.helpers import DUAL_STACK, Net, open_net
from tests.e2e.conftest import launch_controller, open_cluster
from tests.e2e.helpers import running

WHY_NOT = missing_requirements()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/dataplane/" in str(item.path):
            item.add_marker(pytest.mark.dataplane)
            item.add_marker(pytest.mark.e2e)
            if WHY_NOT:
                item.add_marker(pytest.mark.skip(reason=WHY_NOT))


@pytest.fixture(scope="session")
def net() -> Iterator[Net]:
    with open_cluster() as cluster, tempfile.TemporaryDirectory(prefix="dp") as d:
        ctl = running(launch_controller(cluster, *DUAL_STACK))
        try:
            with open_net(cluster, ctl, Path(d)) as n:
                yield n
        finally:
            ctl.stop()
