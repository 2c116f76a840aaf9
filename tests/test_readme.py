"""The README and the pages it links stay true to the code: flags (docs/configuration.md),
metrics and queue names (docs/metrics.md), Event reasons (docs/annotations-and-events.md),
audit kinds and exit codes (docs/audit.md), the README's two commands against the Makefile and
CI, and on every page: links, anchors and cited repository paths, and a length a reader can take.

Each check reads the source of truth (the argparse parser, the Prometheus collectors on a fresh
registry, `controller.core.constants`) and compares it with the page's text, in both directions
where the page has a table: nothing undocumented, nothing documented that no longer exists.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from controller.audit import audit, check
from controller.audit import dataplane as audit_dataplane
from controller.config import build_parser
from controller.core import constants
from controller.runtime.metrics import ControllerMetrics
from controller.runtime.queue_metrics import PrometheusMetricsProvider

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
CONFIGURATION = DOCS / "configuration.md"
METRICS = DOCS / "metrics.md"
EVENTS = DOCS / "annotations-and-events.md"
AUDIT = DOCS / "audit.md"
# Every page a newcomer is pointed at: the README, the contributors' guide, the changelog, docs/.
PAGES = [README, ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]
MAX_LINES = 400
MAX_README_LINES = 200  # a few screens
DEMO_MODULE = "controller.sandbox.demo"
MAKEFILE = ROOT / "Makefile"
RUN_COMMAND = "bash .ci/setup && make demo"
TEST_COMMAND = "bash .ci/setup && make test"

_FLAG = re.compile(r"(?<![\w-])--[a-z0-9]+(?:[-_][a-z0-9]+)*(?![\w-])")
_CODE = re.compile(r"`([^`]+)`")


@pytest.fixture(scope="module")
def readme() -> str:
    return README.read_text(encoding="utf-8")


def _page(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _section(text: str, heading: str, stop: int | None = None) -> str:
    """The body of the Markdown section `heading` (e.g. "### Flags") up to the next heading of
    the same or a higher level (or of level `stop` and higher, when given)."""
    level = heading.split(" ", 1)[0]
    if stop is not None:
        level = "#" * stop
    lines = text.splitlines()
    try:
        start = lines.index(heading)
    except ValueError:
        pytest.fail(f"no section {heading!r}")
    body = []
    fenced = False  # shell comments inside ``` blocks are not headings
    for line in lines[start + 1 :]:
        if line.startswith("```"):
            fenced = not fenced
        marker = line.split(" ", 1)[0]
        if not fenced and marker and set(marker) == {"#"} and len(marker) <= len(level):
            break
        body.append(line)
    return "\n".join(body)


def _first_cells(section: str) -> Iterator[str]:
    """The first cell of every table row of a section (header and separator rows excluded)."""
    for line in section.splitlines():
        if not line.startswith("|"):
            continue
        cell = line.split("|")[1].strip()
        if cell and set(cell) != {"-"} and cell.lower() not in ("flag", "metric", "reason"):
            yield cell


def _walk_actions(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _walk_actions(sub)


def _long_options() -> set[str]:
    return {
        option
        for action in _walk_actions(build_parser())
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }


def _commands() -> set[str]:
    """The sub-commands: choices of a positional `command` or of a subparsers action."""
    out: set[str] = set()
    for action in _walk_actions(build_parser()):
        if isinstance(action, argparse._SubParsersAction):
            out.update(action.choices)
        elif not action.option_strings and action.choices is not None:
            out.update(str(choice) for choice in action.choices)
    return out


# --- flags ---------------------------------------------------------------------------------------


def _flags_table() -> set[str]:
    cells = _first_cells(_section(_page(CONFIGURATION), "## Flags"))
    return {flag for cell in cells for flag in _FLAG.findall(cell)}


def test_the_parser_has_flags() -> None:
    # Guards the other checks against an empty parse of the parser.
    assert {"--ovn-nb-addr", "--worker-num", "--kubeconfig"} <= _long_options()


def test_every_flag_is_in_the_flags_table() -> None:
    table = _flags_table()
    missing = sorted(_long_options() - table)
    assert not missing, f"flags in --help but not in docs/configuration.md's table: {missing}"


def test_the_flags_table_names_no_stale_flag() -> None:
    table = _flags_table()
    stale = sorted(table - _long_options())
    assert not stale, f"docs/configuration.md documents flags --help does not have: {stale}"


def test_every_sub_command_is_documented() -> None:
    commands = _commands()
    assert {"run", "check"} <= commands
    config = _section(_page(CONFIGURATION), "# Configuration", stop=2)
    documented = {code for cell in _first_cells(config) for code in _CODE.findall(cell)}
    missing = sorted(commands - documented)
    assert not missing, f"sub-commands missing from README's command table: {missing}"


# --- metrics -------------------------------------------------------------------------------------


def _exposed_metric_names() -> set[str]:
    """Every metric family the controller registers, by the name Prometheus scrapes."""
    registry = CollectorRegistry()
    ControllerMetrics(registry)
    PrometheusMetricsProvider(registry)
    names = set()
    for family in registry.collect():
        # prometheus_client strips `_total` from a counter's family name; the sample keeps it.
        names.add(f"{family.name}_total" if family.type == "counter" else family.name)
    return names


def test_metrics_are_collected() -> None:
    names = _exposed_metric_names()
    assert "workqueue_depth" in names and "subnet_available_ip_count" in names
    assert "rest_client_requests_total" in names


def test_every_metric_is_in_the_metrics_table() -> None:
    section = _section(_page(METRICS), "# Metrics and health endpoints", stop=2)
    table = {code for cell in _first_cells(section) for code in _CODE.findall(cell)}
    missing = sorted(_exposed_metric_names() - table)
    assert not missing, f"metrics registered but not in README's metrics table: {missing}"


def test_the_metrics_table_names_no_stale_metric() -> None:
    section = _section(_page(METRICS), "# Metrics and health endpoints", stop=2)
    table = {
        code
        for cell in _first_cells(section)
        for code in _CODE.findall(cell)
        if not code.startswith("/")  # the endpoints table shares the section
    }
    stale = sorted(table - _exposed_metric_names())
    assert not stale, f"README documents metrics that are not registered: {stale}"


def test_every_pod_queue_name_is_documented() -> None:
    text = _page(METRICS)
    missing = [name for name in constants.POD_QUEUES if f"`{name}`" not in text]
    assert not missing, f"work queue names (the workqueue_* `name` label) missing: {missing}"


# --- events --------------------------------------------------------------------------------------


def test_every_event_reason_is_documented() -> None:
    reasons = {value for name, value in vars(constants).items() if name.startswith("REASON_")}
    assert "AcquireAddressFailed" in reasons
    text = _page(EVENTS)
    missing = sorted(r for r in reasons if f"`{r}`" not in text)
    assert not missing, f"Event reasons missing from README: {missing}"


# --- the `check` audit ---------------------------------------------------------------------------

_KIND = re.compile(r"[a-z]+(?:-[a-z]+)+")


def test_audit_kinds_match_the_check_section() -> None:
    kinds = {
        value
        for module in (audit, audit_dataplane)
        for name, value in vars(module).items()
        if name.startswith("KIND_")
    }
    assert "sg-mismatch" in kinds
    section = re.sub(r"```.*?```", "", _page(AUDIT), flags=re.S)
    documented = {code for code in _CODE.findall(section) if _KIND.fullmatch(code)}
    missing = sorted(kinds - documented)
    assert not missing, f"audit finding kinds missing from README's check section: {missing}"
    stale = sorted(documented - kinds)
    assert not stale, f"README's check section names kinds the audit does not have: {stale}"


def test_check_exit_codes_are_documented() -> None:
    section = _page(AUDIT)
    for code, meaning in (
        (check.EXIT_CLEAN, "clean"),
        (check.EXIT_FINDINGS, "findings"),
        (check.EXIT_UNAVAILABLE, "the API server or the"),
    ):
        assert f"{code} {meaning}" in section, f"check exit code {code} ({meaning}) undocumented"


# --- the two commands ----------------------------------------------------------------------------


def _commands_block(readme: str) -> list[str]:
    section = _section(readme, "## The two commands")
    match = re.search(r"```sh\n(.*?)```", section, re.S)
    assert match, "the two commands section has no ```sh block"
    return [
        line.strip()
        for line in match.group(1).splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def test_the_two_commands_come_first(readme: str) -> None:
    prose = re.sub(r"```.*?```", "", readme, flags=re.S)
    headings = [line for line in prose.splitlines() if line.startswith("## ")]
    assert headings and headings[0] == "## The two commands"


def test_the_two_commands_block(readme: str) -> None:
    assert _commands_block(readme) == [RUN_COMMAND, TEST_COMMAND]


def test_the_two_commands_name_existing_scripts(readme: str) -> None:
    scripts = {
        word
        for line in _commands_block(readme)
        for before, word in zip(line.split(), line.split()[1:], strict=False)
        if before == "bash"
    }
    assert scripts == {".ci/setup"}
    for script in scripts:
        assert (ROOT / script).is_file(), f"{script} named in README does not exist"


def _make_recipe(target: str) -> str:
    """The recipe lines of a Makefile target."""
    match = re.search(rf"^{target}:[^\n]*\n((?:\t[^\n]*\n)+)", MAKEFILE.read_text(), re.M)
    assert match, f"Makefile has no target {target!r}"
    return match.group(1)


def test_the_run_command_names_the_demo_module(readme: str) -> None:
    assert f"-m {DEMO_MODULE}" in _make_recipe("demo")
    # The module `make demo` runs (a package runs its `__main__`) must import and have a main().
    spec = importlib.util.find_spec(DEMO_MODULE)
    if spec is not None:
        entry = DEMO_MODULE
        if spec.submodule_search_locations is not None:
            entry = f"{DEMO_MODULE}.__main__"
        module = importlib.import_module(entry)
        assert callable(getattr(module, "main", None)), f"{entry} has no main()"


def test_ci_runs_the_readme_test_command() -> None:
    # CI (.ci/run) is the README's test command: set-up, then `make test`.
    lines = [
        line.strip()
        for line in (ROOT / ".ci/run").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[-2:] == ["bash .ci/setup", "make test"]
    recipe = _make_recipe("test")
    assert "$(PYTEST)" in recipe


# --- every page ----------------------------------------------------------------------------------


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in paths]


def test_the_pages_exist() -> None:
    assert {"docs/configuration.md", "docs/metrics.md", "CONTRIBUTING.md"} <= set(_ids(PAGES))


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_no_page_is_too_long(page: Path) -> None:
    limit = MAX_README_LINES if page == README else MAX_LINES
    assert len(_page(page).splitlines()) <= limit


def test_the_readme_links_every_docs_page(readme: str) -> None:
    linked = {link.split("#", 1)[0] for link in re.findall(r"\]\(([^)]+)\)", readme)}
    missing = sorted(p for p in _ids(sorted(DOCS.glob("*.md"))) if p not in linked)
    assert not missing, f"docs pages the README does not link: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_relative_links_point_at_existing_files(page: Path) -> None:
    links = re.findall(r"\]\(([^)]+)\)", _page(page))
    local = [
        link.split("#", 1)[0] for link in links if "://" not in link and not link.startswith("#")
    ]
    missing = [link for link in local if not (page.parent / link).exists()]
    assert not missing, f"{page.name} links to missing files: {missing}"


_REPO_PATH = re.compile(r"`((?:controller|tests|bench|cmd|charts|docs|\.ci)/[\w./-]*)`")


def test_the_code_layout_cites_module_paths() -> None:
    cited = set(_REPO_PATH.findall(_page(ROOT / "CONTRIBUTING.md")))
    assert {"controller/app.py", "controller/cli.py"} <= cited


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_cited_repository_paths_exist(page: Path) -> None:
    cited = set(_REPO_PATH.findall(_page(page)))
    missing = sorted(path for path in cited if not (ROOT / path).exists())
    assert not missing, f"{page.name} cites paths that do not exist: {missing}"


def _slug(heading: str) -> str:
    text = heading.lstrip("#").strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    return {
        _slug(line)
        for line in re.sub(r"```.*?```", "", text, flags=re.S).splitlines()
        if line.startswith("#")
    }


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_anchor_links_point_at_headings(page: Path) -> None:
    missing = []
    for target in re.findall(r"\]\(([^)]*#[^)]+)\)", _page(page)):
        path, anchor = target.split("#", 1)
        if "://" in path:
            continue
        dest = (page.parent / path) if path else page
        if dest.suffix == ".md" and anchor not in _anchors(_page(dest)):
            missing.append(target)
    assert not missing, f"{page.name} links to missing headings: {missing}"
