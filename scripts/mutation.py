"""Mutation testing of the Liqo core: run mutmut on liqo_rules against tests/liqo, print the score
per module and the surviving mutants, and fail when a module kills less than the threshold.

    python scripts/mutation.py [--threshold 90] [--modules peers,selectors.parse] [--fresh] [--report-only]

The score of a module is killed / (mutants - equivalent mutants). Timeouts count as killed. Mutants that
survive, that no test reaches, or that were not run count against the score. Equivalent mutants (changes
that cannot alter behaviour) are listed once, with the reason, in tests/liqo/equivalent_mutants.toml,
keyed by module, function and the changed source text (not by mutmut's numbered name, which shifts when
a function is edited); an entry whose function moved to another module still matches and is reported.

Caching: mutmut keeps each verdict in mutants/ (git-ignored) until the function's source changes (it
hashes every function it mutates). Tests are not part of that key, so when the tests that cover
liqo_rules change (tests/liqo, pytest.ini or mutmut's configuration), the verdicts that were not kills
are cleared and the test-to-function map is rebuilt; kills are kept (a new test cannot un-kill a
mutant). After deleting or weakening a test, run with --fresh.

The verdicts are kept in the repository too (``mutation/verdicts.json.gz``: every module's verdicts with
its function hashes, mutmut's test map and the tests' fingerprint), written at the end of every run.
A clone without mutants/ (CI) starts from them, so it runs only the mutants of the functions and tests
that changed since, and still reports the score of every module.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "mutants"
EQUIVALENT_FILE = ROOT / "tests" / "liqo" / "equivalent_mutants.toml"
CACHE_KEY_FILE = MUTANTS / "liqo-mutation-cache-key.json"
RUN_LOG = MUTANTS / "mutmut-run.log"
STATS_FILE = MUTANTS / "mutmut-stats.json"
KEPT = ROOT / "mutation" / "verdicts.json.gz"
SOURCE_ROOT = Path("liqo_rules")

KILLED = {"killed", "timeout", "caught by type check", "segfault"}


@dataclass
class Mutant:
    name: str
    module: str
    function: str
    status: str
    before: str = ""
    after: str = ""


@dataclass
class Equivalent:
    module: str
    function: str
    before: str
    after: str
    reason: str
    matched: list[Mutant] = field(default_factory=list)


def tests_fingerprint() -> str:
    """What the cached verdicts depend on besides the mutated source: the tests that cover liqo_rules
    (tests/liqo, the only tests mutmut runs), pytest's configuration and mutmut's."""
    h = hashlib.sha256()
    paths = sorted(p for p in (ROOT / "tests" / "liqo").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for p in [*paths, ROOT / "pytest.ini"]:
        if p.name == EQUIVALENT_FILE.name:
            continue  # only read by the report
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(p.read_bytes())
    mutmut_config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    h.update(json.dumps(mutmut_config, sort_keys=True).encode())
    return h.hexdigest()


def restore_kept_verdicts() -> None:
    """Seed mutants/ with the verdicts kept in the repository when it has none of its own."""
    if CACHE_KEY_FILE.exists() or not KEPT.exists():
        return
    kept = json.loads(gzip.decompress(KEPT.read_bytes()))
    for relative, meta in kept["meta"].items():
        path = MUTANTS / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(meta, indent=4))
    STATS_FILE.write_text(json.dumps(kept["stats"], indent=4))
    CACHE_KEY_FILE.write_text(json.dumps({"tests": kept["tests"]}))
    verdicts = sum(len(meta["exit_code_by_key"]) for meta in kept["meta"].values())
    print(f"started from {verdicts} verdicts of {len(kept['meta'])} modules kept in {KEPT.relative_to(ROOT)}")


def keep_verdicts(key: str) -> None:
    """Write this run's verdicts to the repository's copy (unchanged bytes when nothing changed)."""
    kept = {
        "tests": key,
        "meta": {str(p.relative_to(MUTANTS)): json.loads(p.read_text()) for p in meta_files()},
        "stats": json.loads(STATS_FILE.read_text()),
    }
    data = gzip.compress(json.dumps(kept, sort_keys=True, separators=(",", ":")).encode(), mtime=0)
    if not KEPT.exists() or KEPT.read_bytes() != data:
        KEPT.parent.mkdir(exist_ok=True)
        KEPT.write_bytes(data)
        print(f"verdicts kept in {KEPT.relative_to(ROOT)} (commit it)")


def meta_files() -> list[Path]:
    return sorted((MUTANTS / SOURCE_ROOT).rglob("*.py.meta"))


def invalidate_if_tests_changed(key: str) -> None:
    old = json.loads(CACHE_KEY_FILE.read_text()) if CACHE_KEY_FILE.exists() else {}
    if old.get("tests") == key or not MUTANTS.exists():
        return
    from mutmut.stats import status_by_exit_code

    cleared = 0
    for meta in meta_files():
        data = json.loads(meta.read_text())
        codes = data.get("exit_code_by_key", {})
        for name, code in codes.items():
            if code is not None and status_by_exit_code[code] not in KILLED:
                codes[name] = None
                cleared += 1
        meta.write_text(json.dumps(data, indent=4))
    (MUTANTS / "mutmut-stats.json").unlink(missing_ok=True)
    print(f"tests or configuration changed: {cleared} cached non-kills will be run again")


def save_cache_key(key: str) -> None:
    CACHE_KEY_FILE.write_text(json.dumps({"tests": key}))


def run_mutmut() -> None:
    MUTANTS.mkdir(exist_ok=True)
    key = tests_fingerprint()  # of the tests this run copies, not of whatever is there when it ends
    restore_kept_verdicts()
    invalidate_if_tests_changed(key)
    print(f"running mutmut on {SOURCE_ROOT} (log: {RUN_LOG.relative_to(ROOT)}) ...", flush=True)
    with RUN_LOG.open("w") as log:
        rc = subprocess.call([sys.executable, "-m", "mutmut", "run"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    if rc != 0:
        tail = RUN_LOG.read_text(errors="replace")[-3000:]
        sys.exit(f"mutmut failed (exit {rc}); end of the log:\n{tail}")
    save_cache_key(key)
    keep_verdicts(key)


def changed_lines(diff: str) -> tuple[str, str]:
    before, after = [], []
    for line in diff.splitlines():
        if line.startswith(("---", "+++", "@@")):
            continue
        if line.startswith("-"):
            before.append(line[1:].strip())
        elif line.startswith("+"):
            after.append(line[1:].strip())
    return "\n".join(before), "\n".join(after)


def load_mutants() -> list[Mutant]:
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code
    from mutmut.utils.format_utils import orig_function_and_class_names_from_key

    mutants = []
    for meta in meta_files():
        source = meta.relative_to(MUTANTS).with_suffix("")  # liqo_rules/x.py
        module = ".".join(source.with_suffix("").parts)
        codes = json.loads(meta.read_text()).get("exit_code_by_key", {})
        for name, code in codes.items():
            function, cls = orig_function_and_class_names_from_key(name)
            m = Mutant(name, module, f"{cls}.{function}" if cls else function, status_by_exit_code[code])
            if m.status not in KILLED:
                m.before, m.after = changed_lines(get_diff_for_mutant(name, path=source))
            mutants.append(m)
    return mutants


def load_equivalents() -> list[Equivalent]:
    if not EQUIVALENT_FILE.exists():
        return []
    data = tomllib.loads(EQUIVALENT_FILE.read_text(encoding="utf-8"))
    out = []
    for e in data.get("equivalent", []):
        missing = {"module", "function", "before", "after", "reason"} - set(e)
        if missing or not e["reason"].strip():
            sys.exit(f"{EQUIVALENT_FILE.relative_to(ROOT)}: entry {e} lacks {sorted(missing) or ['a reason']}")
        out.append(Equivalent(e["module"], e["function"], e["before"].strip(), e["after"].strip(), e["reason"]))
    return out


def match_equivalents(mutants: list[Mutant], equivalents: list[Equivalent]) -> set[str]:
    by_change: dict[tuple[str, str, str], list[Equivalent]] = defaultdict(list)
    for e in equivalents:
        by_change[(e.function, e.before, e.after)].append(e)
    names = set()
    for m in mutants:
        if m.status in KILLED:
            continue
        candidates = by_change.get((m.function, m.before, m.after), [])
        # Prefer the entry of the same module; one whose function moved elsewhere still counts.
        chosen = next((e for e in candidates if e.module == m.module), candidates[0] if candidates else None)
        if chosen is not None:
            chosen.matched.append(m)
            names.add(m.name)
    return names


def short(text: str) -> str:
    return " / ".join(text.splitlines()) or "(nothing)"


def report(threshold: float, only: list[str] | None) -> int:
    os.chdir(ROOT)
    mutants = load_mutants()
    if only:
        wanted = {f"liqo_rules.{m}" for m in only}
        mutants = [m for m in mutants if m.module in wanted]
    equivalents = load_equivalents()
    equivalent_names = match_equivalents(mutants, equivalents)

    per_module: dict[str, list[Mutant]] = defaultdict(list)
    for m in mutants:
        per_module[m.module].append(m)

    failing = []
    print()
    print(f"{'module':40} {'mutants':>8} {'killed':>7} {'equiv.':>7} {'alive':>6} {'score':>7}")
    totals = [0, 0, 0, 0]
    for module in sorted(per_module):
        ms = per_module[module]
        killed = sum(m.status in KILLED for m in ms)
        equiv = sum(m.name in equivalent_names for m in ms)
        alive = len(ms) - killed - equiv
        counted = len(ms) - equiv
        score = 100.0 * killed / counted if counted else 100.0
        flag = "" if score >= threshold else "  < threshold"
        if flag:
            failing.append(module)
        print(f"{module:40} {len(ms):8} {killed:8} {equiv:7} {alive:6} {score:6.1f}%{flag}")
        for i, n in enumerate((len(ms), killed, equiv, alive)):
            totals[i] += n
    counted = totals[0] - totals[2]
    total_score = 100.0 * totals[1] / counted if counted else 100.0
    print(f"{'total':40} {totals[0]:8} {totals[1]:8} {totals[2]:7} {totals[3]:6} {total_score:6.1f}%")

    alive_mutants = [m for m in mutants if m.status not in KILLED and m.name not in equivalent_names]
    if alive_mutants:
        print(f"\nsurviving mutants ({len(alive_mutants)}; `.venv/bin/mutmut show <name>` prints the diff):")
        for m in alive_mutants:
            print(f"  [{m.status}] {m.name}\n      {short(m.before)}\n   -> {short(m.after)}")

    stale = [e for e in equivalents if not e.matched]
    if stale and not only:
        print(f"\n{len(stale)} equivalent-mutant entries match no surviving mutant (killed now, or the code changed):")
        for e in stale:
            print(f"  {e.module} {e.function}: {short(e.before)} -> {short(e.after)}")
    moved = [(e, m) for e in equivalents for m in e.matched if m.module != e.module]
    for e, m in moved:
        print(f"note: equivalent entry for {e.function} is listed under {e.module} but matched in {m.module}")

    if failing:
        print(f"\nFAIL: below {threshold:g}% killed: {', '.join(failing)}")
        return 1
    print(f"\nOK: every module kills at least {threshold:g}% of its non-equivalent mutants")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threshold", type=float, default=90.0, help="minimum percent killed per module")
    parser.add_argument("--modules", help="comma-separated modules under liqo_rules to report (all run)")
    parser.add_argument("--fresh", action="store_true", help="forget every cached verdict first")
    parser.add_argument("--report-only", action="store_true", help="report the cached verdicts, run nothing")
    args = parser.parse_args()
    start = time.monotonic()
    if args.fresh and MUTANTS.exists():
        shutil.rmtree(MUTANTS)
    if not args.report_only:
        run_mutmut()
    rc = report(args.threshold, args.modules.split(",") if args.modules else None)
    print(f"mutation testing took {time.monotonic() - start:.0f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
