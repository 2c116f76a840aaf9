"""Smoke run of bench/security_groups.py --quick: it finishes and prints one row of positive
figures in which the edit rewrites exactly one ACL row. No timing assertion."""

from __future__ import annotations

import re

import pytest

from tests.bench.helpers import run_bench

pytestmark = pytest.mark.timeout(120)


def test_quick_run_prints_figures() -> None:
    proc = run_bench("bench/security_groups.py", "--quick", timeout=100)
    (row,) = [line for line in proc.stdout.splitlines() if re.match(r"\s*\d", line)]
    rules, translate, create, edit, baseline, ratio, ours, theirs = (
        float(x) for x in re.findall(r"\d+(?:\.\d+)?", row)
    )
    assert min(rules, translate, create, edit, baseline, ratio) > 0
    assert (ours, theirs) == (1, rules + 4)
