"""The NB connection's fast insert writes IndexedRows' storage directly only in the layout it
was read from (python-ovs 4 keeps a list per key; 3.x, e.g. Debian 12's, keeps the row)."""

from __future__ import annotations

from controller.ovn.connection import _lists


def test_an_empty_table_takes_the_generic_path() -> None:
    assert not _lists({})


def test_python_ovs_4_lists_per_key() -> None:
    assert _lists({"uuid-1": ["row"]})


def test_python_ovs_3_rows_per_key() -> None:
    assert not _lists({"uuid-1": object()})
