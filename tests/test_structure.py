"""The walls between the rooms: module and class sizes, import direction, no import cycles.

Read from the source with `ast` (nothing is imported), so a new module that breaks a rule fails here.
"""

from __future__ import annotations

import ast
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
                names.add(target)
                # `from pkg import submodule` imports the submodule too.
                names.update(f"{target}.{alias.name}" for alias in child.names)
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
