"""IPRangeList: examples, then a Hypothesis model check against a plain Python set."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.ipam.ip_range import IPRange, IPRangeList


def test_constructor_sorts_and_merges_overlapping_and_adjacent_ranges() -> None:
    ranges = IPRangeList([(20, 30), (1, 3), (4, 6), (25, 40), (10, 10), (9, 8)])
    assert ranges.ranges() == [(1, 6), (10, 10), (20, 40)]
    assert ranges.size == 6 + 1 + 21
    assert len(ranges) == 3
    assert list(ranges) == [IPRange(1, 6), IPRange(10, 10), IPRange(20, 40)]


def test_remove_splits_and_add_merges_back() -> None:
    ranges = IPRangeList([(1, 10)])
    assert ranges.remove(5)
    assert ranges.ranges() == [(1, 4), (6, 10)]
    assert not ranges.remove(5)
    assert ranges.add(5)
    assert ranges.ranges() == [(1, 10)]
    assert not ranges.add(5)
    assert ranges.remove(1) and ranges.remove(10)
    assert ranges.ranges() == [(2, 9)]


def test_range_operations_count_what_changed() -> None:
    ranges = IPRangeList([(1, 5), (10, 15)])
    assert ranges.add_range(4, 11) == 4  # 6..9 are new
    assert ranges.ranges() == [(1, 15)]
    assert ranges.remove_range(0, 3) == 3
    assert ranges.remove_range(7, 8) == 2
    assert ranges.ranges() == [(4, 6), (9, 15)]
    assert ranges.remove_range(100, 200) == 0
    assert ranges.intersection(5, 10).ranges() == [(5, 6), (9, 10)]


def test_lowest_not_in_skips_over_skipped_addresses() -> None:
    ranges = IPRangeList([(1, 2), (5, 6)])
    assert ranges.lowest() == 1
    assert ranges.lowest_not_in({1, 2, 5}) == 6
    assert ranges.lowest_not_in({1, 2, 5, 6}) is None
    assert IPRangeList().lowest() is None


def test_contains_and_equality() -> None:
    ranges = IPRangeList([(1, 2), (5, 6)])
    assert 5 in ranges and 3 not in ranges and "5" not in ranges
    assert ranges == IPRangeList([(5, 6), (1, 2)])
    copy = ranges.copy()
    copy.add(3)
    assert copy != ranges


def test_huge_ipv6_range_is_one_range() -> None:
    first, last = (0xFD00 << 112) + 1, (0xFD00 << 112) + (1 << 64) - 2
    ranges = IPRangeList([(first, last)])
    assert ranges.size == (1 << 64) - 2
    assert ranges.remove(first + (1 << 40))
    assert len(ranges) == 2
    with pytest.raises(ValueError):
        IPRange(2, 1)


OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove", "add_range", "remove_range"]),
        st.integers(0, 150),
        st.integers(0, 8),
    ),
    max_size=150,
)


def check_blocks(ranges: IPRangeList, load: int) -> None:
    """The block layout behind the ranges: no empty or oversized block, firsts in sync."""
    sblocks, eblocks = ranges._sblocks, ranges._eblocks
    assert [len(b) for b in sblocks] == [len(b) for b in eblocks]
    assert all(0 < len(b) <= 2 * load for b in sblocks)
    assert ranges._firsts == [b[0] for b in sblocks]
    assert len(ranges) == sum(len(b) for b in sblocks)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 150), st.integers(0, 150)), max_size=12),
    OPS,
    st.sampled_from([1, 2, 4, 256]),
)
def test_matches_a_set_model(
    initial: list[tuple[int, int]], ops: list[tuple[str, int, int]], load: int
) -> None:
    ranges = IPRangeList(initial, load=load)
    model = {ip for s, e in initial for ip in range(s, e + 1)}
    for op, a, width in ops:
        b = a + width
        if op == "add":
            assert ranges.add(a) == (a not in model)
            model.add(a)
        elif op == "remove":
            assert ranges.remove(a) == (a in model)
            model.discard(a)
        elif op == "add_range":
            assert ranges.add_range(a, b) == len(set(range(a, b + 1)) - model)
            model |= set(range(a, b + 1))
        else:
            assert ranges.remove_range(a, b) == len(set(range(a, b + 1)) & model)
            model -= set(range(a, b + 1))
        pairs = ranges.ranges()
        # Invariant: sorted, disjoint, never adjacent; size matches.
        assert all(e1 + 1 < s2 for (_, e1), (s2, _) in itertools.pairwise(pairs))
        assert {ip for s, e in pairs for ip in range(s, e + 1)} == model
        assert ranges.size == len(model)
        assert ranges.lowest() == (min(model) if model else None)
        check_blocks(ranges, load)
    for probe in range(-1, 170):
        assert ranges.contains(probe) == (probe in model)
    assert (
        ranges.intersection(20, 90).ranges()
        == IPRangeList([(ip, ip) for ip in model if 20 <= ip <= 90]).ranges()
    )
    assert ranges.copy() == ranges


def test_many_fragments_split_and_fold_blocks() -> None:
    ranges = IPRangeList([(0, 20_000)], load=8)
    for ip in range(1, 20_000, 2):
        assert ranges.remove(ip)
    assert len(ranges) == 10_001
    check_blocks(ranges, 8)
    for ip in range(19_999, 0, -2):
        assert ranges.add(ip)
        if ip % 1001 == 0:
            check_blocks(ranges, 8)
    assert ranges.ranges() == [(0, 20_000)]
    check_blocks(ranges, 8)
