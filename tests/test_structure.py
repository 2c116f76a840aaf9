"""The layout the code keeps: production modules a reader takes in at once, a pod controller of
composed parts.

Production is what the wheel ships: `controller/` minus the packages setup.cfg's
`[options.packages.find] exclude` leaves out (the sandbox and the test doubles), read from
setup.cfg so the two never disagree.
"""

from __future__ import annotations

import ast
import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "controller"
MAX_LINES = 500


def _excluded_dirs() -> list[Path]:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg", encoding="utf-8")
    names = cfg.get("options.packages.find", "exclude").split()
    return [ROOT.joinpath(*n.split(".")) for n in names if not n.endswith(".*")]


def production_modules() -> list[Path]:
    excluded = _excluded_dirs()
    return sorted(
        path for path in PACKAGE.rglob("*.py") if not any(path.is_relative_to(d) for d in excluded)
    )


def test_the_wheel_excludes_are_read() -> None:
    # a renamed setup.cfg key must not make every module "production" silently, or none
    excluded = _excluded_dirs()
    assert PACKAGE / "sandbox" in excluded and PACKAGE / "testing" in excluded
    modules = production_modules()
    assert PACKAGE / "pod" / "controller.py" in modules
    assert not any(p.is_relative_to(PACKAGE / "sandbox") for p in modules)


def test_no_production_module_is_over_500_lines() -> None:
    sizes = {p: len(p.read_text(encoding="utf-8").splitlines()) for p in production_modules()}
    over = {str(p.relative_to(ROOT)): n for p, n in sizes.items() if n > MAX_LINES}
    assert over == {}, f"split these modules (at most {MAX_LINES} lines each): {over}"


def _pod_classes() -> dict[str, list[tuple[str, ast.ClassDef]]]:
    """Per module of controller/pod, its top-level classes."""
    found: dict[str, list[tuple[str, ast.ClassDef]]] = {}
    for path in sorted((PACKAGE / "pod").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found[path.name] = [(n.name, n) for n in tree.body if isinstance(n, ast.ClassDef)]
    return found


def _base_names(cls: ast.ClassDef) -> list[str]:
    names = []
    for base in cls.bases:
        if isinstance(base, ast.Name):
            names.append(base.id)
        elif isinstance(base, ast.Attribute):
            names.append(base.attr)
    return names


def test_the_pod_controller_has_no_stubs() -> None:
    stubs = []
    for path in sorted((PACKAGE / "pod").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(exc, ast.Name) and exc.id == "NotImplementedError":
                    stubs.append(f"{path.name}:{node.lineno}")
    assert stubs == [], f"parts call each other through stubs: {stubs}"


def test_the_pod_controller_parts_are_composed_not_inherited() -> None:
    classes = _pod_classes()
    own = {name for module in classes.values() for name, _ in module}
    assert {"PodController", "AddHandler", "PodEvents"} <= own  # the scan sees the parts
    inherited = [
        f"{module}: {name}({', '.join(bases)})"
        for module, defs in classes.items()
        for name, cls in defs
        if (bases := _base_names(cls)) and any(b in own or b.endswith("Mixin") for b in bases)
    ]
    mixins = [name for module in classes.values() for name, _ in module if "Mixin" in name]
    assert inherited == [] and mixins == [], (inherited, mixins)
