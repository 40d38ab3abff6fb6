"""Mutation testing of the code that decides a rental's fate (`make mutation`; not in CI: it takes minutes).

Each mutant is one small change to a decision module (cosmic-ray's operators plus `mutation_operators`: tables
too). It is tested by the tests that reach it only: the lines each test runs (setup included) come from one
coverage run of the suites below; a mutant on a line run at import (a table, a constant) is reached by the tests
that run a line naming what that statement defines. The tests run in a child forked from this process, which
has the heavy libraries imported already, stopping at the first failure. A mutant no test fails survived;
one listed in bench/mutation-equivalent.txt (with the reason) is equivalent and not run.

    python scripts/mutation.py                       # every module; the last line is one JSON object
    python scripts/mutation.py rentals/states.py     # only the modules named
    python scripts/mutation.py --list rentals/states.py   # the mutants' keys, nothing run
    MUTATION_FRESH_COVERAGE=1 python scripts/mutation.py   # measure which tests reach what again

Survivors are listed in .run/mutation/<module>.survivors, one line each, in the equivalent file's format.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.dont_write_bytecode = True  # a mutant's bytecode must never be cached beside the real module

import cosmic_ray.plugins  # noqa: E402
import parso  # noqa: E402
from cosmic_ray.commands.init import _all_work_items  # noqa: E402
from cosmic_ray.mutating import mutate_code, use_mutation  # noqa: E402
from coverage import CoverageData  # noqa: E402
from mutation_operators import OPERATORS  # noqa: E402
from mutation_warm import test_database_copy, test_database_template, warm  # noqa: E402

# Module → the functions mutated (None: all of it). Of the engine, only the claim.
MODULES: dict[str, tuple[str, ...] | None] = {
    "rentals/outcomes.py": None,
    "rentals/upstream/parse.py": None,
    "rentals/states.py": None,
    "rentals/transitions.py": None,
    "rentals/idempotency_promise.py": None,
    "rentals/engine.py": ("_claimable", "may_have_reached_lium", "rental_claim", "_settle_unsafe_resend"),
}
# Where the tests of these modules live (the other suites reach them only through these behaviours).
# The tests written for each module run first: a mutant is usually killed by one of them, and the run stops there.
FIRST: dict[str, tuple[str, ...]] = {
    "rentals/outcomes.py": ("tests/rentals/test_outcomes_", "tests/rentals/test_rent_engine.py"),
    "rentals/upstream/parse.py": ("tests/rentals/test_upstream_parse_", "tests/rentals/test_upstream_values.py"),
    "rentals/states.py": ("tests/rentals/test_states_", "tests/rentals/test_rent_transitions.py"),
    "rentals/transitions.py": ("tests/rentals/test_rent_transitions.py", "tests/rentals/test_one_writer.py"),
    "rentals/idempotency_promise.py": ("tests/rentals/test_outcomes_promise.py", "tests/rentals/test_rent_resend"),
    "rentals/engine.py": ("tests/rentals/test_rent_engine.py", "tests/rentals/test_rent_resend_guard.py"),
}
SUITES = ["tests/rentals", "tests/ops"]
# The randomised model test explores histories by chance: a mutant it kills one run and not the next would
# make the score a coin toss, and it alone takes minutes. The scripted tests must pin each decision down.
DESELECT = ["tests/rentals/test_engine_model.py::test_the_engine_keeps_its_promises_whatever_lium_answers"]
SOURCES = ["accounts", "api", "billing", "common", "notifications", "ops", "rentals", "dashboard"]
EQUIVALENT_FILE = ROOT / "bench" / "mutation-equivalent.txt"
RUN = ROOT / ".run" / "mutation"
TEMPLATE_DB = RUN / "template-db.sqlite3"  # the test database as migrated, copied for each child
WARM_MODULES = RUN / "third-party.modules"  # what a test run imports from outside the project (see mutation_warm)
TIMEOUT_SECONDS = 300

# cosmic-ray's operators kept, one variant each where it has many: an arithmetic operator into its inverse, a
# comparison into its boundary partner and its negation, numbers ±1, True/False, `not` added or removed,
# and/or swapped, exception types replaced, loops run zero times.
ARITHMETIC = {("Add", "Sub"), ("Sub", "Add"), ("Mul", "Div"), ("Div", "Mul"), ("FloorDiv", "Mul"), ("Pow", "Mul")}
COMPARISON = {
    ("Lt", "LtE"), ("Lt", "GtE"), ("LtE", "Lt"), ("LtE", "Gt"), ("Gt", "GtE"), ("Gt", "LtE"), ("GtE", "Gt"),
    ("GtE", "Lt"), ("Eq", "NotEq"), ("NotEq", "Eq"), ("In", "NotIn"), ("NotIn", "In"), ("Is", "IsNot"),
    ("IsNot", "Is"),
}  # fmt: skip
KEPT = {
    "NumberReplacer",
    "ReplaceTrueWithFalse",
    "ReplaceFalseWithTrue",
    "AddNot",
    "ReplaceUnaryOperator",
    "ReplaceAndWithOr",
    "ReplaceOrWithAnd",
    "ExceptionReplacer",
    "ZeroIterationForLoop",
}


def core_operator_kept(name: str) -> bool:
    kind, _, rest = name.removeprefix("core/").partition("_")
    source, _, target = rest.partition("_")
    if kind == "ReplaceBinaryOperator":
        return (source, target) in ARITHMETIC
    if kind == "ReplaceComparisonOperator":
        return (source, target) in COMPARISON
    return kind in KEPT


def operators() -> list[str]:
    """Register this project's operators with cosmic-ray; return the names of all operators used."""
    cosmic_ray.plugins.OPERATOR_PROVIDERS["dashboard"] = OPERATORS
    return [
        name
        for name in cosmic_ray.plugins.operator_names()
        if name.startswith("dashboard/") or core_operator_kept(name)
    ]


def test_environment() -> None:
    """Run the tests on the embedded stack in a folder of their own (SQLite file, file broker)."""
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL"):
        os.environ.pop(name, None)
    os.environ["RUN_DIR"] = str(RUN / "test")
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"


def coverage_file() -> Path:
    """Return the per-test coverage of the suites. Measured again in full when a source file or a test helper
    changed since (by content: each mutant rewrites its module), and for changed test files only otherwise."""
    data, manifest = RUN / "coverage.sqlite", RUN / "coverage.sums.json"
    sums = {str(p.relative_to(ROOT)): hashlib.sha256(p.read_bytes()).hexdigest() for p in _measured_files()}
    measured = manifest.exists() and data.exists() and WARM_MODULES.exists()
    known = json.loads(manifest.read_text()) if measured else {}
    changed = [path for path, digest in sums.items() if known.get(path) != digest]
    fresh = bool(os.environ.get("MUTATION_FRESH_COVERAGE"))
    if known and not changed and not fresh:
        return data
    if known and not fresh and all(Path(p).name.startswith("test_") and p.startswith("tests/") for p in changed):
        measure_coverage(data, changed, append=True)
    else:
        data.unlink(missing_ok=True)
        WARM_MODULES.unlink(missing_ok=True)
        measure_coverage(data, SUITES, append=False)
    manifest.write_text(json.dumps(sums))
    return data


def _measured_files() -> list[Path]:
    return sorted(p for d in SUITES + SOURCES for p in (ROOT / d).rglob("*.py"))


def measure_coverage(data: Path, tests: list[str], *, append: bool) -> None:
    """Run `tests` under coverage, recording which test (setup and teardown included) ran each line."""
    print(f"Measuring which tests reach which lines: {' '.join(tests)}", flush=True)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--reuse-db", "-p", "mutation_warm"]
    command += [f"--cov={source}" for source in SOURCES] + ["--cov-context=test", "--cov-report="]
    command += ["--cov-append"] if append else []
    command += ["-m", "not e2e and not browser"] + tests + [f"--deselect={test}" for test in DESELECT]
    env = {**os.environ, "COVERAGE_FILE": str(data), "MUTATION_WARM_FILE": str(WARM_MODULES)}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "scripts"), env.get("PYTHONPATH", "")])
    finished = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=False)  # noqa: S603
    if finished.returncode != 0 or not data.exists():
        # A failing test would kill every mutant it reaches, and flatter the figures: the tests must pass first.
        data.unlink(missing_ok=True)
        sys.exit(f"The coverage run failed (pytest exit {finished.returncode}): make these pass first: {tests}")


@dataclass
class Reach:
    """Which tests run each line, and which lines name each identifier (for lines run at import)."""

    tests_by_line: dict[str, dict[int, set[str]]] = field(default_factory=dict)
    lines_by_name: dict[str, list[tuple[str, int]]] = field(default_factory=lambda: defaultdict(list))
    bound_by_line: dict[str, dict[int, set[str]]] = field(default_factory=dict)

    @classmethod
    def load(cls, data_path: Path) -> Reach:
        reach = cls()
        data = CoverageData(basename=str(data_path))
        data.read()
        for filename in data.measured_files():
            path = str(Path(filename).relative_to(ROOT))
            lines: dict[int, set[str]] = {}
            for lineno, contexts in (data.contexts_by_lineno(filename) or {}).items():
                lines[lineno] = {c.rpartition("|")[0] for c in contexts if c}
            reach.tests_by_line[path] = lines
            reach._index_names(path)
        return reach

    def _index_names(self, path: str) -> None:
        module = ast.parse((ROOT / path).read_text())
        bound: dict[int, set[str]] = {}
        for node in ast.walk(module):
            if isinstance(node, ast.Name):
                self.lines_by_name[node.id].append((path, node.lineno))
            elif isinstance(node, ast.Attribute):
                self.lines_by_name[node.attr].append((path, node.lineno))
        for statement in _top_statements(module):
            for lineno in range(statement.lineno, (statement.end_lineno or statement.lineno) + 1):
                bound.setdefault(lineno, set()).update(_bound_names(statement))
        self.bound_by_line[path] = bound

    def ordered(self, path: str, tests: set[str], killers: Iterable[str] = ()) -> list[str]:
        """Return the tests that killed an earlier mutant of `path` first (the next one is often on the same or a
        nearby line), then those that run most of `path`: a mutant is usually killed by one of them, and the run
        stops at the first failure."""
        lines = self.tests_by_line.get(path, {})
        weight = dict.fromkeys(tests, 0)
        for reached in lines.values():
            for test in reached & tests:
                weight[test] += 1
        first = FIRST.get(path, ())

        def rank(test: str) -> tuple[int, int, str]:
            written_for = next((i for i, prefix in enumerate(first) if test.startswith(prefix)), len(first))
            return written_for, -weight[test], test

        front = list(dict.fromkeys(test for test in killers if test in tests))
        return front + sorted(tests - set(front), key=rank)

    def tests_for(self, path: str, first: int, last: int) -> set[str]:
        """Return the tests that run lines first..last of `path`, or that use what they define at import."""
        lines = self.tests_by_line.get(path, {})
        tests = set().union(*(lines.get(n, set()) for n in range(first, last + 1)))
        if tests:
            return tests
        names = set().union(*(self.bound_by_line.get(path, {}).get(n, set()) for n in range(first, last + 1)))
        seen: set[str] = set()
        while names - seen:
            name = (names - seen).pop()
            seen.add(name)
            for where, lineno in self.lines_by_name.get(name, []):
                reached = self.tests_by_line.get(where, {}).get(lineno, set())
                tests |= reached
                if not reached:  # named at import itself (a table built from another): follow what it defines
                    names |= self.bound_by_line.get(where, {}).get(lineno, set())
        return tests


def _top_statements(module: ast.Module) -> Iterable[ast.stmt]:
    """Yield the module's statements and those of its classes' bodies (what runs at import)."""
    for statement in module.body:
        yield statement
        if isinstance(statement, ast.ClassDef):
            yield from statement.body


def _bound_names(statement: ast.stmt) -> set[str]:
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {statement.name}
    targets: list[ast.expr] = []
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, ast.AnnAssign):
        targets = [statement.target]
    return {node.id for target in targets for node in ast.walk(target) if isinstance(node, ast.Name)}


def function_lines(path: Path, names: tuple[str, ...] | None) -> set[int] | None:
    """Return the lines of the named top-level functions (None: the whole module is mutated)."""
    if names is None:
        return None
    module = ast.parse(path.read_text())
    return {
        n
        for node in module.body
        if isinstance(node, ast.FunctionDef) and node.name in names
        for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    }


def load_equivalents() -> dict[str, str]:
    """Return `path: original => mutated` → reason, from the equivalent file (`#` lines are comments)."""
    equivalents = {}
    for line in EQUIVALENT_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, reason = line.partition(" -- ")
            if not reason.strip():
                sys.exit(f"{EQUIVALENT_FILE.name}: an equivalent mutant needs a reason after ' -- ': {line}")
            equivalents[key.strip()] = reason.strip()
    return equivalents


def mutant_key(path: str, original: str, mutated: str, operator: str) -> str:
    """Return `path: <first changed line> => <its mutated form> [operator]`, stable while those lines are."""
    removed = added = ""
    for line in difflib.unified_diff(original.splitlines(), mutated.splitlines(), lineterm="", n=0):
        if line.startswith("-") and not line.startswith("---") and not removed:
            removed = line[1:].strip()
        elif line.startswith("+") and not line.startswith("+++") and not added:
            added = line[1:].strip()
    return f"{path}: {removed} => {added} [{operator}]"


def failed_test() -> str | None:
    """Return the test that failed in the last child (from pytest's short summary), if one did."""
    for line in (RUN / "last-test.log").read_text(errors="replace").splitlines():
        if line.startswith(("FAILED ", "ERROR ")) and "::" in line:
            return line.split()[1]
    return None


def run_tests(tests: list[str], database: Path) -> bool:
    """Run the tests in a forked child, in this order; return whether one failed (the mutant is killed)."""
    argsfile = RUN / "tests.args"
    argsfile.write_text("\n".join(tests) + "\n")
    test_database_copy(TEMPLATE_DB, database)
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:  # the child imports the project afresh, the mutated module included
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        log = os.open(RUN / "last-test.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(log, 1)
        os.dup2(log, 2)
        import pytest

        # --tb=native: a killed mutant's report is only read by someone debugging (pytest's own costs seconds).
        args = ["-p", "pytest_django.plugin", "-x", "-q", "-p", "no:cacheprovider", "--reuse-db", "--tb=native"]
        args.append(f"@{argsfile}")
        os._exit(int(pytest.main(args)))
    deadline = time.monotonic() + TIMEOUT_SECONDS
    try:
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status) != 0
            time.sleep(0.05)
        return True  # a mutant that hangs the tests is caught
    finally:
        with contextlib.suppress(ChildProcessError, ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # timed out, or this run was stopped: the child goes too
            os.waitpid(pid, 0)


FIRST_STAGE_TESTS = 40


def tests_fail(tests: list[str], database: Path) -> bool:
    """Run the likeliest killers in a child of their own first, then, if they pass, the rest in another.

    pytest-django runs database tests before the others whatever the order given, so in one run a module's own
    (database-free) tests, ranked first, would run last, after hundreds of others.
    """
    first, rest = tests[:FIRST_STAGE_TESTS], tests[FIRST_STAGE_TESTS:]
    return run_tests(first, database) or (bool(rest) and run_tests(rest, database))


@dataclass
class Tally:
    mutants: int = 0
    killed: int = 0
    survived: int = 0
    equivalent: int = 0
    survivors: list[str] = field(default_factory=list)

    def figures(self) -> dict[str, float | int]:
        judged = self.mutants - self.equivalent
        score = round(100 * self.killed / judged, 1) if judged else 100.0
        return {"mutants": self.mutants, "killed": self.killed, "survived": self.survived,
                "equivalent": self.equivalent, "score": score}  # fmt: skip


def mutate_module(
    path: str, reach: Reach, operator_names: list[str], equivalents: dict[str, str], database: Path
) -> Tally:
    """Apply each mutant of one module in turn, run the tests that reach it, and count."""
    tally = Tally()
    killers: list[str] = []  # the tests that killed this module's mutants so far, the latest first
    allowed = function_lines(ROOT / path, MODULES[path])
    original = (ROOT / path).read_text()
    for spec in mutants(path, operator_names, allowed):
        first, last = spec.start_pos[0], spec.end_pos[0]
        mutated = mutated_code(original, spec)
        if mutated is None:
            continue
        key = mutant_key(path, original, mutated, spec.operator_name)
        tally.mutants += 1
        if key in equivalents:
            tally.equivalent += 1
            continue
        operator = cosmic_ray.plugins.get_operator(spec.operator_name)()
        with use_mutation(Path(spec.module_path), operator, spec.occurrence):
            tests = reach.tests_for(path, first, last)
            started = time.monotonic()
            if tests and tests_fail(reach.ordered(path, tests, killers), database):
                tally.killed += 1
                killer = failed_test()
                verdict = f"killed by {killer}" if killer else "killed (no test named: failed at import, or timed out)"
                killers[:0] = [killer] if killer else []
            else:
                tally.survived += 1
                verdict = "survived" if tests else "no test reaches it"
                tally.survivors.append(f"{key} -- {verdict}")
            with (RUN / (Path(path).stem + ".log")).open("a") as log:
                log.write(f"{verdict}: {key} ({len(tests)} tests, {time.monotonic() - started:.0f} s)\n")
        print(f"  {path} {tally.mutants}: {tally.killed} killed, {tally.survived} survived", end="\r", flush=True)
    return tally


def list_mutants(path: str, operator_names: list[str]) -> None:
    """Print each mutant's key, without running anything (to write the equivalent file)."""
    allowed = function_lines(ROOT / path, MODULES[path])
    original = (ROOT / path).read_text()
    for spec in mutants(path, operator_names, allowed):
        mutated = mutated_code(original, spec)
        if mutated is not None:
            print(mutant_key(path, original, mutated, spec.operator_name))


def mutants(path: str, operator_names: list[str], allowed: set[int] | None) -> list[Any]:
    """Return cosmic-ray's mutation specs for `path`, with the operators kept, on the allowed lines."""
    module = parso.parse((ROOT / path).read_text())
    return [
        item.mutations[0]
        for item in _all_work_items([ROOT / path], {})
        if item.mutations[0].operator_name in operator_names
        and (allowed is None or item.mutations[0].start_pos[0] in allowed)
        and _arithmetic_if_binary(module, item.mutations[0])
    ]


def _arithmetic_if_binary(module: Any, spec: Any) -> bool:
    """Leave out cosmic-ray's "binary operators" that are not arithmetic: the `*` that makes the arguments after
    it keyword-only, and `*`/`**` unpacking (`/` there is a positional-only marker or a syntax error)."""
    if "ReplaceBinaryOperator" not in spec.operator_name:
        return True
    leaf = module.get_leaf_for_position(tuple(spec.start_pos))
    return leaf is not None and leaf.parent is not None and leaf.parent.type in ("term", "arith_expr", "power")


def mutated_code(original: str, spec: Any) -> str | None:
    """Return the module with this mutation applied, or None where the operator cannot apply it."""
    try:
        return mutate_code(original, cosmic_ray.plugins.get_operator(spec.operator_name)(), spec.occurrence)
    except AttributeError:  # cosmic-ray's ExceptionReplacer on a dotted exception name (`upstream.UpstreamError`)
        return None


def main(requested: list[str]) -> int:
    if requested[:1] == ["--list"]:
        names = operators()
        for path in requested[1:] or list(MODULES):
            list_mutants(path, names)
        return 0
    modules = requested or list(MODULES)
    unknown = [m for m in modules if m not in MODULES]
    if unknown:
        sys.exit(f"Not a module this run mutates: {unknown}. Choose from {list(MODULES)}.")
    RUN.mkdir(parents=True, exist_ok=True)
    # Stopped from outside, the module being mutated is put back first (use_mutation restores it on the way out).
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    for path in modules:
        (RUN / (Path(path).stem + ".log")).unlink(missing_ok=True)
    test_environment()
    reach = Reach.load(coverage_file())
    warm(WARM_MODULES, RUN / "pycache", [*SOURCES, "tests"])
    database = test_database_template(TEMPLATE_DB)
    names, equivalents = operators(), load_equivalents()
    report: dict[str, dict[str, float | int]] = {}
    for path in modules:
        started = time.monotonic()
        control = reach.ordered(path, reach.tests_for(path, 1, len((ROOT / path).read_text().splitlines())))[:20]
        if run_tests(control, database):
            # Without a mutant the tests must pass in the forked child, or every mutant would count as killed.
            sys.exit(f"{path}: its first tests fail without a mutant; see {RUN / 'last-test.log'}")
        tally = mutate_module(path, reach, names, equivalents, database)
        survivors = RUN / (Path(path).stem + ".survivors")
        survivors.write_text("".join(line + "\n" for line in tally.survivors))
        report[path] = tally.figures()
        print(f"{path}: {report[path]} in {time.monotonic() - started:.0f} s; survivors in {survivors}", flush=True)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
