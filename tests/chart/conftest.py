"""Chart test fixtures: the chart loaded once through Helm's Go SDK, and its default render."""

from __future__ import annotations

from collections.abc import Iterator

import helm_python
import pytest

from tests.chart.helpers import CHART_DIR, Rendered, render


@pytest.fixture(scope="session")
def chart() -> Iterator[helm_python.Chart]:
    with helm_python.Chart.load(CHART_DIR) as loaded:
        yield loaded


@pytest.fixture(scope="session")
def default_render(chart: helm_python.Chart) -> Rendered:
    return render(chart)
