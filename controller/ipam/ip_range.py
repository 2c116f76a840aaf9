"""Sets of integer addresses kept as sorted, merged, inclusive ranges.

`IPRangeList` is the one data structure of the allocator: a set of integers stored as disjoint,
non-adjacent ``[start, end]`` ranges in ascending order. Memory is proportional to the number of
ranges, never to the number of addresses, so a whole IPv6 /64 is one range.

Contract:

* invariants after every public call: ranges are sorted, pairwise disjoint and never adjacent
  (``end + 1 < next.start``), and `size` equals the sum of the range sizes;
* `contains`, `add`, `remove`, and `lowest` cost O(log n) in the number of ranges n. Starts sit in a
  ``sortedcontainers.SortedList`` (O(log n) insert, delete, bisect and index) and ends in a dict
  keyed by start; `add_range` / `remove_range` cost O((k + 1) log n) where k is the number of
  ranges they merge or cut;
* addresses are plain ``int`` of either family; the list does not know about families or CIDRs.

Not thread-safe: the `IPAM` facade serialises access.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from sortedcontainers import SortedList  # type: ignore[import-untyped]


@dataclass(frozen=True, slots=True)
class IPRange:
    """An inclusive range of integer addresses, ``start <= end``."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start > self.end:
            raise ValueError(f"empty range [{self.start}, {self.end}]")

    @property
    def size(self) -> int:
        return self.end - self.start + 1

    def __contains__(self, ip: object) -> bool:
        return isinstance(ip, int) and self.start <= ip <= self.end


class IPRangeList:
    """A mutable set of integers stored as merged ranges (see the module docstring)."""

    __slots__ = ("_ends", "_size", "_starts")

    def __init__(self, ranges: Iterable[tuple[int, int]] = ()) -> None:
        self._starts = SortedList()
        self._ends: dict[int, int] = {}
        self._size = 0
        for start, end in _normalize(ranges):
            self._starts.add(start)
            self._ends[start] = end
            self._size += end - start + 1

    # -- queries ---------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Number of addresses in the set."""
        return self._size

    def __len__(self) -> int:
        """Number of ranges (kube-ovn's IPRangeList.Len())."""
        return len(self._starts)

    def __bool__(self) -> bool:
        return self._size > 0

    def __iter__(self) -> Iterator[IPRange]:
        for start in self._starts:
            yield IPRange(start, self._ends[start])

    def ranges(self) -> list[tuple[int, int]]:
        return [(start, self._ends[start]) for start in self._starts]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IPRangeList):
            return NotImplemented
        return self._ends == other._ends

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        shown = ", ".join(f"{s}-{e}" if s != e else str(s) for s, e in self.ranges()[:8])
        more = ", ..." if len(self) > 8 else ""
        return f"IPRangeList([{shown}{more}])"

    def copy(self) -> IPRangeList:
        clone = IPRangeList()
        clone._starts = self._starts.copy()
        clone._ends = dict(self._ends)
        clone._size = self._size
        return clone

    def _range_at_or_before(self, ip: int) -> tuple[int, int] | None:
        """The range with the greatest start <= ip, if any."""
        index = self._starts.bisect_right(ip) - 1
        if index < 0:
            return None
        start: int = self._starts[index]
        return start, self._ends[start]

    def contains(self, ip: int) -> bool:
        found = self._range_at_or_before(ip)
        return found is not None and ip <= found[1]

    def __contains__(self, ip: object) -> bool:
        return isinstance(ip, int) and self.contains(ip)

    def lowest(self) -> int | None:
        """The smallest address in the set, or None when empty."""
        if not self._starts:
            return None
        lowest: int = self._starts[0]
        return lowest

    def lowest_not_in(self, skipped: frozenset[int] | set[int]) -> int | None:
        """The smallest address in the set that is not in `skipped`, or None.

        Walks ranges from the bottom; every range it passes over is made entirely of skipped
        addresses, so the walk costs O(len(skipped) + log n).
        """
        if not skipped:
            return self.lowest()
        start: int
        for start in self._starts:
            end = self._ends[start]
            candidate = start
            while candidate <= end and candidate in skipped:
                candidate += 1
            if candidate <= end:
                return candidate
        return None

    # -- mutation --------------------------------------------------------------------------

    def add(self, ip: int) -> bool:
        """Insert one address; False if it was already present."""
        return self.add_range(ip, ip) == 1

    def remove(self, ip: int) -> bool:
        """Delete one address; False if it was absent."""
        return self.remove_range(ip, ip) == 1

    def add_range(self, start: int, end: int) -> int:
        """Union with ``[start, end]``, merging overlapping and adjacent ranges.

        Returns the number of addresses that were not present before.
        """
        if start > end:
            return 0
        touched: list[int] = []
        # Every range that overlaps or touches [start, end] has start <= end + 1 and
        # end >= start - 1; they are contiguous in sort order, so walk down from end + 1.
        for s in self._starts.irange(maximum=end + 1, reverse=True):
            if self._ends[s] < start - 1:
                break
            touched.append(s)
        new_start, new_end = start, end
        already = 0
        for s in touched:
            e = self._ends.pop(s)
            self._starts.remove(s)
            already += max(0, min(e, end) - max(s, start) + 1)
            new_start = min(new_start, s)
            new_end = max(new_end, e)
            self._size -= e - s + 1
        self._starts.add(new_start)
        self._ends[new_start] = new_end
        self._size += new_end - new_start + 1
        return (end - start + 1) - already

    def remove_range(self, start: int, end: int) -> int:
        """Subtract ``[start, end]``; returns the number of addresses removed."""
        if start > end:
            return 0
        touched: list[int] = []
        for s in self._starts.irange(maximum=end, reverse=True):
            if self._ends[s] < start:
                break
            touched.append(s)
        removed = 0
        for s in touched:
            e = self._ends.pop(s)
            self._starts.remove(s)
            self._size -= e - s + 1
            removed += min(e, end) - max(s, start) + 1
            if s < start:
                self._starts.add(s)
                self._ends[s] = start - 1
                self._size += start - s
            if e > end:
                self._starts.add(end + 1)
                self._ends[end + 1] = e
                self._size += e - end
        return removed

    def intersection(self, start: int, end: int) -> IPRangeList:
        """A new list holding this set's addresses within ``[start, end]``."""
        pieces: list[tuple[int, int]] = []
        for s in self._starts.irange(maximum=end, reverse=True):
            e = self._ends[s]
            if e < start:
                break
            pieces.append((max(s, start), min(e, end)))
        pieces.reverse()
        return IPRangeList(pieces)


def _normalize(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sort and merge arbitrary (possibly overlapping, unsorted) ranges; drop empty ones."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(r for r in ranges if r[0] <= r[1]):
        if merged and start <= merged[-1][1] + 1:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged
