""".env.example lists every environment variable the product reads, and only those, each with the
code's default.

The names are collected from the source with ``ast`` (no import, no guess): calls of the readers in
liqo_dash/env.py (``env.string("NAME", default)`` ...) and of settings' ``_secret``, and
``os.environ.get`` / ``os.getenv`` / ``os.environ[...]`` with a literal name (or a module-level string
constant). Test settings (liqo_dash/settings_test.py), tests and bench are not the product.

.env.example is ``NAME=value`` lines, each under a one-line ``# comment`` (no inline comments: Docker's
``--env-file`` would keep them in the value)."""

from __future__ import annotations

import ast
import operator
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.waits import ROOT

SOURCES = ("access", "offloading", "liqo_dash", "sandbox", "deploy/gunicorn.conf.py", "manage.py")
NOT_PRODUCT = ("liqo_dash/settings_test.py",)
# liqo_dash.env's readers and what their default is.
READERS = {
    "string": "string",
    "boolean": "boolean",
    "integer": "integer",
    "number": "number",
    "string_list": "list",
    "raw": "string",
}
SECRET_READERS = {"_secret"}  # settings: the value, else a key generated once into var/
_MISSING = object()
# Names whose readers default differently, on purpose; .env.example writes one of the defaults.
SEVERAL_DEFAULTS = {
    # Unset under `make run` (run_demo): an embedded redis-server; elsewhere redis://127.0.0.1:6379/0.
    "REDIS_URL",
}
_LINE = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$")


@dataclass
class Read:
    name: str
    kind: str  # string | boolean | integer | number | list
    default: Any  # a Python literal, or _MISSING when the code's default is computed
    where: str


def _python_files() -> list[Path]:
    files: list[Path] = []
    for source in SOURCES:
        path = ROOT / source
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return [f for f in files if f.relative_to(ROOT).as_posix() not in NOT_PRODUCT and "migrations" not in f.parts]


def _constants(tree: ast.Module) -> dict[str, Any]:
    """Module-level ``NAME = <literal>`` assignments (for ``os.environ.get(ENV)``)."""
    found: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return found


_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}


def _literal(node: ast.AST | None, constants: dict[str, Any]) -> Any:
    """The value of a literal, a module-level constant or arithmetic on numbers (``14 * 24 * 3600``);
    _MISSING for anything computed at run time."""
    if node is None:
        return _MISSING
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _literal(node.left, constants), _literal(node.right, constants)
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (left, right))
        return _ARITHMETIC[type(node.op)](left, right) if numbers else _MISSING
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _MISSING


def _is_os_environ(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def _environ_get(node: ast.AST) -> bool:
    """``os.environ.get(...)`` or ``os.getenv(...)``."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    func = node.func
    return (func.attr == "get" and _is_os_environ(func.value)) or (
        func.attr == "getenv" and isinstance(func.value, ast.Name) and func.value.id == "os"
    )


def reads() -> list[Read]:
    """Every read of an environment variable with a literal name in the product's source."""
    found: list[Read] = []
    for path in _python_files():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        constants = _constants(tree)
        # `os.environ.get(NAME) or DEFAULT`: the default is the right-hand side.
        or_defaults: dict[int, ast.AST] = {}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and len(node.values) == 2):
                continue
            if _environ_get(node.values[0]):
                or_defaults[id(node.values[0])] = node.values[1]
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT).as_posix()}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call) and node.args:
                name = _literal(node.args[0], constants)
                if not isinstance(name, str):
                    continue
                func = node.func
                default_node = node.args[1] if len(node.args) > 1 else None
                for keyword in node.keywords:
                    if keyword.arg == "default":
                        default_node = keyword.value
                if (
                    isinstance(func, ast.Attribute)
                    and isinstance(func.value, ast.Name)
                    and func.value.id == "env"
                    and func.attr in READERS
                ):
                    kind = READERS[func.attr]
                    default = _literal(default_node, constants)
                    if default is _MISSING and default_node is None:
                        default = "" if func.attr == "string" else _MISSING
                    found.append(Read(name, kind, default, where))
                elif isinstance(func, ast.Name) and func.id in SECRET_READERS:
                    found.append(Read(name, "string", _MISSING, where))
                elif _environ_get(node):
                    if id(node) in or_defaults:
                        default_node = or_defaults[id(node)]
                    found.append(Read(name, "string", _literal(default_node, constants), where))
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_os_environ(node.value):
                name = _literal(node.slice, constants)
                if isinstance(name, str):
                    found.append(Read(name, "string", _MISSING, where))
    return found


def example() -> dict[str, tuple[str, int]]:
    """NAME -> (value, line number) of .env.example; fails on a line that is neither a comment, blank
    nor ``NAME=value``, on an entry without a comment line above it and on a name listed twice."""
    entries: dict[str, tuple[str, int]] = {}
    previous = ""
    for number, line in enumerate((ROOT / ".env.example").read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            previous = line
            continue
        match = _LINE.match(line)
        assert match, f".env.example:{number}: not NAME=value: {line!r}"
        name, value = match.groups()
        assert " #" not in value and "\t#" not in value, f".env.example:{number}: an inline comment: {line!r}"
        assert previous.startswith("# ") and len(previous) > 3, f".env.example:{number}: {name} has no comment line"
        assert name not in entries, f".env.example:{number}: {name} listed twice"
        entries[name] = (value, number)
        previous = line
    return entries


def _written(kind: str, default: Any) -> str:
    """How the code's default is written in the environment."""
    if kind == "boolean":
        return "true" if default else "false"
    if kind == "list":
        return ",".join(default)
    return str(default)


def _same(kind: str, value: str, default: Any) -> bool:
    if kind == "integer":
        return re.fullmatch(r"-?[0-9]+", value) is not None and int(value) == default
    if kind == "number" or (kind == "string" and isinstance(default, int | float) and not isinstance(default, bool)):
        try:
            return float(value) == float(default)
        except ValueError:
            return False
    return value == _written(kind, default)


def test_the_collector_finds_the_readers() -> None:
    """A guard on the collector itself: reads of every shape are found."""
    names = {read.name for read in reads()}
    assert {"SECRET_KEY", "DATABASE_URL", "ALLOWED_HOSTS", "PROMETHEUS_MULTIPROC_DIR", "LOG_FORMAT"} <= names
    assert "LIQO_DASH_HEARTBEAT_DIR" in names  # os.environ.get(ENV) with ENV a module constant
    assert "LIQO_DASH_WARMUP" in names  # os.environ.get in liqo_dash/wsgi.py
    assert len(names) > 60


def test_every_variable_the_code_reads_is_listed() -> None:
    listed = example()
    missing: dict[str, str] = {}
    for read in reads():
        if read.name not in listed:
            missing.setdefault(read.name, read.where)
    assert not missing, "read by the code but not in .env.example:\n" + "\n".join(
        f"  {name}  ({where})" for name, where in sorted(missing.items())
    )


def test_nothing_stale_is_listed() -> None:
    read = {r.name for r in reads()}
    stale = sorted(set(example()) - read)
    assert not stale, f"in .env.example but read nowhere in the code: {stale}"


def test_the_defaults_are_the_codes() -> None:
    """Where the code's default is a literal, .env.example writes it (for SEVERAL_DEFAULTS: one of them)."""
    listed = example()
    by_name: dict[str, list[Read]] = {}
    for read in reads():
        if read.name in listed and read.default is not _MISSING:
            by_name.setdefault(read.name, []).append(read)
    wrong = []
    for name, found in sorted(by_name.items()):
        value, line = listed[name]
        agree = [_same(read.kind, value, read.default) for read in found]
        if not (any(agree) if name in SEVERAL_DEFAULTS else all(agree)):
            read = found[agree.index(False)]
            wrong.append(
                f"  .env.example:{line} {name}={value}, the code ({read.where}): {_written(read.kind, read.default)!r}"
            )
    assert not wrong, "defaults that differ from the code's:\n" + "\n".join(wrong)


def test_each_variable_has_one_literal_default_in_the_code() -> None:
    """Two reads of the same name with different literal defaults would make .env.example ambiguous."""
    seen: dict[str, Read] = {}
    clashes = []
    for read in reads():
        if read.default is _MISSING or read.name in SEVERAL_DEFAULTS:
            continue
        first = seen.setdefault(read.name, read)
        if first is not read and not _same(read.kind, _written(first.kind, first.default), read.default):
            clashes.append(f"  {read.name}: {first.default!r} ({first.where}) and {read.default!r} ({read.where})")
    assert not clashes, "\n".join(clashes)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('env.string("A", "x")', [("A", "string", "x")]),
        ('env.string("A")', [("A", "string", "")]),
        ('env.boolean("B", True)', [("B", "boolean", True)]),
        ('env.integer("C", default=3)', [("C", "integer", 3)]),
        ('env.integer("C", 15 * 60)', [("C", "integer", 900)]),
        ('env.string("C", str(X / "y"))', [("C", "string", "?")]),
        ('env.string_list("D", ["a", "b"])', [("D", "list", ["a", "b"])]),
        ('os.environ.get("E", "1")', [("E", "string", "1")]),
        ('K = "F"\nD = "/tmp"\nos.environ.get(K) or D', [("F", "string", "/tmp")]),
        ('os.getenv("G")', [("G", "string", "?")]),  # unset: no literal to compare
        ('os.environ["H"]', [("H", "string", "?")]),
        ('os.environ["I"] = "x"', []),
        ("env.string(name)", []),
    ],
)
def test_the_collector_on_shapes(
    source: str, expected: list[tuple[str, str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(source + "\n")
    monkeypatch.setattr(sys.modules[__name__], "_python_files", lambda: [sample])
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = [(r.name, r.kind, "?" if r.default is _MISSING else r.default) for r in reads()]
    assert found == expected
