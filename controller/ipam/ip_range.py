"""Sets of integer addresses kept as sorted, merged, inclusive ranges.

`IPRangeList` is the one data structure of the allocator: a set of integers stored as disjoint,
non-adjacent ``[start, end]`` ranges in ascending order. Memory is proportional to the number of
ranges, never to the number of addresses, so a whole IPv6 /64 is one range.

Contract:

* invariants after every public call: ranges are sorted, pairwise disjoint and never adjacent
  (``end + 1 < next.start``), and `size` equals the sum of the range sizes;
* `contains`, `add`, `remove` and `lowest` cost O(log n) in the number of ranges n (amortised,
  see below); `add_range` / `remove_range` cost O((k + 1) log n) where k is the number of ranges
  they merge or cut;
* addresses are plain ``int`` of either family; the list does not know about families or CIDRs.

Layout: the ranges are cut into blocks of at most ``2 * _LOAD`` consecutive ranges (parallel
lists of starts and ends; a block of ``_LOAD // 4`` ranges or fewer is folded into its left
neighbour), with a top-level list of each block's first start. A lookup is two C-level bisects
(top level, then one block); an insert or delete shifts at most one block (bounded by the
constant ``_LOAD``), and a block split or fold, which shifts the top-level list (n / _LOAD
entries), happens at most once per ~_LOAD/4 updates of that block. This is the design of
``sortedcontainers``, specialised for ranges: taking the lowest address or growing a range by one
end is an in-place update with no insertion at all.

Not thread-safe: the `IPAM` facade serialises access.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

_LOAD = 256


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


# A position: (block index, index within the block); block -1 means "before every range".
_Pos = tuple[int, int]


class IPRangeList:
    """A mutable set of integers stored as merged ranges (see the module docstring)."""

    __slots__ = ("_count", "_eblocks", "_firsts", "_load", "_sblocks", "_size")

    def __init__(self, ranges: Iterable[tuple[int, int]] = (), *, load: int = _LOAD) -> None:
        """`load` is the target block length (tests use tiny ones to exercise splits)."""
        if load < 1:
            raise ValueError("load must be positive")
        self._load = load
        merged = _normalize(ranges)
        self._sblocks: list[list[int]] = [
            [s for s, _ in merged[i : i + load]] for i in range(0, len(merged), load)
        ]
        self._eblocks: list[list[int]] = [
            [e for _, e in merged[i : i + load]] for i in range(0, len(merged), load)
        ]
        self._firsts: list[int] = [block[0] for block in self._sblocks]
        self._count = len(merged)
        self._size = sum(e - s + 1 for s, e in merged)

    # -- queries ---------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Number of addresses in the set."""
        return self._size

    def __len__(self) -> int:
        """Number of ranges (kube-ovn's IPRangeList.Len())."""
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __iter__(self) -> Iterator[IPRange]:
        for start, end in self._pairs():
            yield IPRange(start, end)

    def _pairs(self) -> Iterator[tuple[int, int]]:
        for starts, ends in zip(self._sblocks, self._eblocks, strict=True):
            yield from zip(starts, ends, strict=True)

    def ranges(self) -> list[tuple[int, int]]:
        return list(self._pairs())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IPRangeList):
            return NotImplemented
        return self._size == other._size and self.ranges() == other.ranges()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        shown: list[str] = []
        for start, end in self._pairs():
            if len(shown) == 8:
                shown.append("...")
                break
            shown.append(f"{start}-{end}" if start != end else str(start))
        return f"IPRangeList([{', '.join(shown)}])"

    def copy(self) -> IPRangeList:
        clone = IPRangeList(load=self._load)
        clone._sblocks = [list(block) for block in self._sblocks]
        clone._eblocks = [list(block) for block in self._eblocks]
        clone._firsts = list(self._firsts)
        clone._count = self._count
        clone._size = self._size
        return clone

    def contains(self, ip: int) -> bool:
        b = bisect_right(self._firsts, ip) - 1
        if b < 0:
            return False
        j = bisect_right(self._sblocks[b], ip) - 1
        return ip <= self._eblocks[b][j]

    def __contains__(self, ip: object) -> bool:
        return isinstance(ip, int) and self.contains(ip)

    def lowest(self) -> int | None:
        """The smallest address in the set, or None when empty."""
        return self._firsts[0] if self._firsts else None

    def lowest_not_in(self, skipped: frozenset[int] | set[int]) -> int | None:
        """The smallest address in the set that is not in `skipped`, or None.

        Walks ranges from the bottom; every range it passes over is made entirely of skipped
        addresses, so the walk costs O(len(skipped) + 1).
        """
        if not skipped:
            return self.lowest()
        for start, end in self._pairs():
            candidate = start
            while candidate <= end and candidate in skipped:
                candidate += 1
            if candidate <= end:
                return candidate
        return None

    def intersection(self, start: int, end: int) -> IPRangeList:
        """A new list holding this set's addresses within ``[start, end]``."""
        pieces: list[tuple[int, int]] = []
        first = self._locate(start)
        pos: _Pos | None = first if first[0] >= 0 else ((0, 0) if self._count else None)
        while pos is not None:
            s, e = self._at(pos)
            if s > end:
                break
            if e >= start:
                pieces.append((max(s, start), min(e, end)))
            pos = self._next(pos)
        return IPRangeList(pieces, load=self._load)

    # -- mutation --------------------------------------------------------------------------

    def add(self, ip: int) -> bool:
        """Insert one address; False if it was already present."""
        left = self._locate(ip)
        b, j = left
        left_adjacent = False
        if b >= 0:
            end = self._eblocks[b][j]
            if ip <= end:
                return False
            left_adjacent = end + 1 == ip
        right = self._next(left) if b >= 0 else ((0, 0) if self._count else None)
        right_adjacent = right is not None and self._sblocks[right[0]][right[1]] == ip + 1
        self._size += 1
        if left_adjacent and right is not None and right_adjacent:
            self._eblocks[b][j] = self._eblocks[right[0]][right[1]]
            self._delete(right)
        elif left_adjacent:
            self._eblocks[b][j] = ip
        elif right is not None and right_adjacent:
            # Growing a range downwards keeps the order: no insertion needed.
            rb, rj = right
            self._sblocks[rb][rj] = ip
            if rj == 0:
                self._firsts[rb] = ip
        else:
            self._insert(ip, ip)
        return True

    def remove(self, ip: int) -> bool:
        """Delete one address; False if it was absent."""
        pos = self._locate(ip)
        b, j = pos
        if b < 0:
            return False
        start, end = self._sblocks[b][j], self._eblocks[b][j]
        if ip > end:
            return False
        self._size -= 1
        if start == end:
            self._delete(pos)
        elif ip == start:
            # Shrinking a range from below keeps the order: no insertion needed.
            self._sblocks[b][j] = ip + 1
            if j == 0:
                self._firsts[b] = ip + 1
        elif ip == end:
            self._eblocks[b][j] = ip - 1
        else:
            self._eblocks[b][j] = ip - 1
            self._insert(ip + 1, end)
        return True

    def add_range(self, start: int, end: int) -> int:
        """Union with ``[start, end]``, merging overlapping and adjacent ranges.

        Returns the number of addresses that were not present before.
        """
        if start > end:
            return 0
        touched = self._touching(start - 1, end + 1)
        already = 0
        new_start, new_end = start, end
        for pos in touched:  # right to left, so earlier positions stay valid
            s, e = self._at(pos)
            already += max(0, min(e, end) - max(s, start) + 1)
            new_start, new_end = min(new_start, s), max(new_end, e)
            self._size -= e - s + 1
            self._delete(pos, fold=False)
        self._size += new_end - new_start + 1
        self._insert(new_start, new_end)
        return (end - start + 1) - already

    def remove_range(self, start: int, end: int) -> int:
        """Subtract ``[start, end]``; returns the number of addresses removed."""
        if start > end:
            return 0
        removed = 0
        keep: list[tuple[int, int]] = []
        for pos in self._touching(start, end):
            s, e = self._at(pos)
            removed += min(e, end) - max(s, start) + 1
            self._size -= e - s + 1
            self._delete(pos, fold=False)
            if s < start:
                keep.append((s, start - 1))
            if e > end:
                keep.append((end + 1, e))
        for s, e in keep:
            self._size += e - s + 1
            self._insert(s, e)
        return removed

    # -- internals -------------------------------------------------------------------------

    def _locate(self, ip: int) -> _Pos:
        """Position of the range with the greatest start <= ip, or (-1, -1)."""
        b = bisect_right(self._firsts, ip) - 1
        if b < 0:
            return -1, -1
        return b, bisect_right(self._sblocks[b], ip) - 1

    def _at(self, pos: _Pos) -> tuple[int, int]:
        b, j = pos
        return self._sblocks[b][j], self._eblocks[b][j]

    def _next(self, pos: _Pos) -> _Pos | None:
        b, j = pos
        if j + 1 < len(self._sblocks[b]):
            return b, j + 1
        if b + 1 < len(self._sblocks):
            return b + 1, 0
        return None

    def _prev(self, pos: _Pos) -> _Pos | None:
        b, j = pos
        if j > 0:
            return b, j - 1
        if b > 0:
            return b - 1, len(self._sblocks[b - 1]) - 1
        return None

    def _touching(self, low: int, high: int) -> list[_Pos]:
        """Positions (right to left) of the ranges intersecting ``[low, high]``."""
        found: list[_Pos] = []
        last = self._locate(high)
        pos: _Pos | None = last if last[0] >= 0 else None
        while pos is not None:
            _, e = self._at(pos)
            if e < low:
                break
            found.append(pos)
            pos = self._prev(pos)
        return found

    def _insert(self, start: int, end: int) -> None:
        """Insert a range known not to overlap or touch any other (size is the caller's)."""
        self._count += 1
        if not self._sblocks:
            self._sblocks.append([start])
            self._eblocks.append([end])
            self._firsts.append(start)
            return
        b = bisect_right(self._firsts, start) - 1
        if b < 0:
            b, j = 0, 0
        else:
            j = bisect_right(self._sblocks[b], start)
        starts, ends = self._sblocks[b], self._eblocks[b]
        starts.insert(j, start)
        ends.insert(j, end)
        if j == 0:
            self._firsts[b] = start
        if len(starts) > 2 * self._load:
            half = len(starts) // 2
            self._sblocks.insert(b + 1, starts[half:])
            self._eblocks.insert(b + 1, ends[half:])
            self._firsts.insert(b + 1, starts[half])
            del starts[half:]
            del ends[half:]

    def _delete(self, pos: _Pos, *, fold: bool = True) -> None:
        """Remove the range at `pos`. Batch callers pass fold=False: folding a block would move
        the positions of ranges they are still to delete."""
        b, j = pos
        self._count -= 1
        starts, ends = self._sblocks[b], self._eblocks[b]
        del starts[j]
        del ends[j]
        if not starts:
            del self._sblocks[b]
            del self._eblocks[b]
            del self._firsts[b]
            return
        if j == 0:
            self._firsts[b] = starts[0]
        if fold and len(starts) <= self._load // 4 and b > 0:
            # Fold a small block into its left neighbour so the top level stays ~n / _LOAD.
            self._sblocks[b - 1].extend(starts)
            self._eblocks[b - 1].extend(ends)
            del self._sblocks[b]
            del self._eblocks[b]
            del self._firsts[b]
            merged = self._sblocks[b - 1]
            if len(merged) > 2 * self._load:
                half = len(merged) // 2
                self._sblocks.insert(b, merged[half:])
                self._eblocks.insert(b, self._eblocks[b - 1][half:])
                self._firsts.insert(b, merged[half])
                del merged[half:]
                del self._eblocks[b - 1][half:]


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
