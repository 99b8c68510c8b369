"""The walls between the rooms: module and class sizes, import direction, no import cycles between
modules nor between packages.

Read from the source with `ast` (nothing is imported), so a new module that breaks a rule fails here.
Imports inside functions count like the others (only those under `if TYPE_CHECKING:` do not). The layers
themselves are import-linter's contracts in pyproject.toml: the last test runs `lint-imports`.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("liqo_rules", "offloading", "sandbox", "liqo_dash", "access")
# Guides, not targets (docs/architecture.md): a module is cut along a seam of its concepts, usually well
# under 400 lines; past these the test flags it. Never squeeze code (or `# fmt: skip`) to stay under.
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 200


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str, path: Path) -> set[str]:
    """Every module this one imports (at any depth, except under `if TYPE_CHECKING:`), absolute names."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub)
                continue
            if isinstance(child, ast.Import):
                names.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                # `from pkg import submodule` imports the submodule (pkg's __init__ runs first, as it does
                # for `from pkg.submodule import x`: not an import of pkg); any other name imports pkg.
                imported = {f"{target}.{alias.name}" for alias in child.names}
                names.update(imported)
                if not imported <= MODULES.keys():
                    names.add(target)
            visit(child)

    visit(tree)
    return names


def _internal(name: str) -> str | None:
    """The project module an imported name resolves to (longest known prefix), else None."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in MODULES:
            return candidate
        parts.pop()
    return None


GRAPH = {m: {t for n in _imports(m, p) if (t := _internal(n)) and t != m} for m, p in MODULES.items()}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_is_small(module: str) -> None:
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{module} has {lines} lines (limit {MAX_MODULE_LINES}): split it along a seam"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_classes_are_small(module: str) -> None:
    tree = ast.parse(MODULES[module].read_text())
    big = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.end_lineno and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES
    ]
    assert not big, f"classes over {MAX_CLASS_LINES} lines in {module}: {big}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def strongconnect(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return out


def _without_package_inits(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """A package's own __init__ importing its submodules is not a cycle worth reporting; edges
    from a submodule to its parent package are, so only parent -> child edges are dropped."""
    return {m: {t for t in targets if not t.startswith(m + ".")} for m, targets in graph.items()}


def test_no_import_cycles() -> None:
    cycles = _cycles(_without_package_inits(GRAPH))
    assert not cycles, f"import cycles: {cycles}"


def test_cycle_detection_finds_a_planted_cycle() -> None:
    planted = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(planted) == [["a", "b", "c"]]


def _package(module: str) -> str:
    """The package a module belongs to in the package-level picture: its top-level package, except that
    offloading is made of its flows (its first-level packages and modules) and liqo_dash of its modules
    (Django's project package holds both the composition root, on top of everything, and process-wide
    helpers such as env and logs, at the bottom: pyproject.toml places each module)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] in ("offloading", "liqo_dash") else parts[0]


def _package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        mine = _package(module)
        packages.setdefault(mine, set()).update(p for t in targets if (p := _package(t)) != mine)
    return packages


def test_no_package_cycles() -> None:
    """No two packages import each other, however indirectly, imports inside functions included."""
    cycles = _cycles(_package_graph(GRAPH))
    assert not cycles, f"package cycles: {cycles}"


def test_package_cycle_detection_finds_a_planted_cycle_through_submodules() -> None:
    planted = {
        "offloading.snapshot.diagnosis": {"offloading.whatif.preview"},
        "offloading.whatif.preview": {"offloading.snapshot.refresh"},
        "offloading.snapshot.refresh": {"offloading.models"},
        "liqo_dash.urls": {"offloading.views.fleet"},
        "access.conf": {"liqo_dash.env"},
        "liqo_dash.settings": {"access.conf"},
    }
    assert _cycles(_package_graph(planted)) == [["offloading.snapshot", "offloading.whatif"]]


def test_imports_inside_functions_count(tmp_path: Path) -> None:
    source = tmp_path / "planted.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from offloading.views import fleet\n"
        "def late() -> None:\n"
        "    from offloading.whatif.preview import preview\n"
    )
    found = _imports("offloading.snapshot.planted", source)
    assert "offloading.whatif.preview" in found
    assert "offloading.views" not in found and "offloading.views.fleet" not in found


def test_liqo_core_is_pure() -> None:
    """liqo_rules imports nothing from Django and nothing else of the project."""
    offenders = {}
    for module, path in MODULES.items():
        if not (module == "liqo_rules" or module.startswith("liqo_rules.")):
            continue
        bad = {
            n
            for n in _imports(module, path)
            if n.split(".")[0] in ("django", "rest_framework", "celery", "kubernetes", "redis", "sandbox", "liqo_dash")
            or (n.startswith("offloading") and not (n == "liqo_rules" or n.startswith("liqo_rules.")))
        }
        if bad:
            offenders[module] = sorted(bad)
    assert not offenders


def test_sandbox_uses_only_the_liqo_core_of_the_product() -> None:
    offenders = {}
    for module, path in MODULES.items():
        if not module.startswith("sandbox"):
            continue
        bad = {
            n
            for n in _imports(module, path)
            if n.split(".")[0] in ("offloading", "liqo_dash", "django")
            and not (n == "liqo_rules" or n.startswith("liqo_rules."))
        }
        if bad:
            offenders[module] = sorted(bad)
    assert not offenders


def test_nothing_imports_the_celery_tasks_module() -> None:
    """Tasks are enqueued by name: tasks.py calls the use cases, never the other way round."""
    importers = sorted(m for m, targets in GRAPH.items() if "offloading.tasks" in targets)
    assert importers == []


def _late_imports(module: str, path: Path) -> list[tuple[int, str]]:
    """The imports of a project module inside a function of ``module`` (line, first name imported)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] if not node.level else [module]
            else:
                continue
            if any(name.split(".")[0] in PACKAGES for name in names):
                found.append((node.lineno, names[0]))
    return sorted(set(found))


def _says_why(lines: list[str], lineno: int) -> bool:
    """A comment on the import's line, or on the nearest line above that is neither blank nor an import."""
    if "#" in lines[lineno - 1]:
        return True
    for line in reversed(lines[: lineno - 1]):
        text = line.strip()
        if text and not text.startswith(("import ", "from ")):
            return text.startswith("#")
    return False


def test_imports_inside_functions_say_why() -> None:
    """A project module is imported at the top; one imported inside a function (Django's ready(), say)
    carries a comment saying why, so a hidden upward import does not pass for a convenience."""
    offenders = []
    for module, path in MODULES.items():
        lines = path.read_text().splitlines()
        offenders += [
            f"{path.relative_to(ROOT)}:{n} {name}" for n, name in _late_imports(module, path) if not _says_why(lines, n)
        ]
    assert not offenders, f"imports inside functions without a comment saying why: {offenders}"


def test_a_late_import_without_a_reason_is_found(tmp_path: Path) -> None:
    source = tmp_path / "planted.py"
    source.write_text(
        "def ready() -> None:\n"
        "    # ready() is where Django wants signal handlers connected.\n"
        "    from offloading.models import livetriggers\n"
        "def late() -> None:\n"
        "    import json\n"
        "    from offloading.whatif.preview import preview\n"
    )
    lines = source.read_text().splitlines()
    late = _late_imports("offloading.planted", source)
    assert late == [(3, "offloading.models"), (6, "offloading.whatif.preview")]
    assert [_says_why(lines, n) for n, _ in late] == [True, False]


def _lint_imports() -> str:
    """The `lint-imports` of this environment (requirements-dev.txt pins import-linter)."""
    beside = Path(sys.executable).with_name("lint-imports")
    found = str(beside) if beside.exists() else shutil.which("lint-imports")
    assert found, "lint-imports is missing: pip install -r requirements-dev.txt"
    return found


def test_import_contracts_hold() -> None:
    """import-linter's contracts in pyproject.toml (the layers of the flow, the pure Liqo rules, the
    sandbox alone, access below the interface, no cycles between siblings) hold, run from the repo root."""
    result = subprocess.run([_lint_imports(), "--no-logo"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"lint-imports failed:\n{result.stdout[-6000:]}\n{result.stderr[-2000:]}"
    assert "0 broken" in result.stdout


def test_every_part_of_the_apps_has_a_place_in_the_flow() -> None:
    """A new package or module of offloading, access or liqo_dash is placed in the layers contract (a part
    in no layer would be checked by nobody)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    flow = next(contract for contract in config["contracts"] if contract["id"] == "flow")
    placed = {name.strip() for layer in flow["layers"] for name in re.split(r"[|:]", layer)}
    parts = {".".join(m.split(".")[:2]) for m in MODULES if m.split(".")[0] in ("offloading", "access", "liqo_dash")}
    unplaced = sorted(p for p in parts if "." in p and p not in placed)
    assert not unplaced, f"not in any layer of the flow contract (pyproject.toml): {unplaced}"
