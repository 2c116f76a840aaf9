"""Fixtures for the OVN NB client: the two clients, over the shared per-test `nb_server`
(tests/fixtures/nb.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from controller.ovn.api import NbClient
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.sandbox.ovn.ovsdb import NbServer
from controller.testing.fake_nb import FakeNbClient
from tests.ovn.helpers import FakeView, NbctlView, NbView

TIMEOUT = 5.0


@pytest.fixture
def real_client(nb_server: NbServer) -> Iterator[OvsdbappNbClient]:
    client = OvsdbappNbClient.from_addr(nb_server.remote, timeout=TIMEOUT)
    yield client
    client.close()


@dataclass
class Subject:
    nb: NbClient
    view: NbView
    kind: str


@pytest.fixture(params=["fake", "real"])
def subject(request: pytest.FixtureRequest) -> Subject:
    if request.param == "fake":
        fake = FakeNbClient()
        return Subject(fake, FakeView(fake), "fake")
    server: NbServer = request.getfixturevalue("nb_server")
    client: OvsdbappNbClient = request.getfixturevalue("real_client")
    return Subject(client, NbctlView(server.remote), "real")
