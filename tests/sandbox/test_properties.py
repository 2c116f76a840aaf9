"""Property tests: patches and selectors never crash on arbitrary input, only refuse it."""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.sandbox.apiserver.patch import (
    PatchError,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)
from controller.sandbox.apiserver.selectors import parse_field_selector, parse_label_selector

KEYS = st.sampled_from(
    [
        "a",
        "b",
        "name",
        "containers",
        "finalizers",
        "env",
        "$patch",
        "$retainKeys",
        "ports",
        "port",
        "containerPort",
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.sampled_from(["x", "y", "replace", "delete", "merge"]),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
    max_leaves=12,
)
OBJECTS = st.dictionaries(KEYS, JSON, max_size=4)
POINTERS = st.lists(st.sampled_from(["a", "b", "0", "1", "-", "name", "~1", ""]), max_size=3).map(
    lambda parts: "/" + "/".join(parts) if parts else ""
)
OPS = st.lists(
    st.fixed_dictionaries(
        {
            "op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "bogus"]),
            "path": POINTERS,
        },
        optional={"value": JSON, "from": POINTERS},
    ),
    max_size=4,
)


@settings(max_examples=100, deadline=None)
@given(OBJECTS, OBJECTS)
def test_merge_patch_is_total_and_idempotent(doc: dict[str, Any], patch: dict[str, Any]) -> None:
    once = apply_merge_patch(doc, patch)
    assert apply_merge_patch(once, patch) == once


@settings(max_examples=100, deadline=None)
@given(OBJECTS, OBJECTS)
def test_strategic_merge_patch_refuses_but_never_crashes(
    doc: dict[str, Any], patch: dict[str, Any]
) -> None:
    with contextlib.suppress(PatchError, ValueError):
        apply_strategic_merge_patch(doc, patch)


@settings(max_examples=100, deadline=None)
@given(OBJECTS, OPS)
def test_json_patch_refuses_but_never_crashes(doc: dict[str, Any], ops: list[Any]) -> None:
    with contextlib.suppress(PatchError, ValueError):
        apply_json_patch(doc, ops)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="ab=!,() innotx-/.<>0123", max_size=20))
def test_selector_parsers_refuse_but_never_crash(text: str) -> None:
    for parse in (parse_label_selector, lambda t: parse_field_selector(t, ("metadata.name", "a"))):
        with contextlib.suppress(ValueError):
            parse(text)
