"""Fail when the project's modules or apps import one another in a circle (run by `make lint`).

Every `import` counts, at any depth: one inside a function is still a dependency, only a deferred one.
Two graphs are checked: module → module, and app → app (an app is a top-level package such as `rentals`).
Tests, benchmarks, scripts and migrations are left out: nothing in the product imports them.

    python scripts/check_import_cycles.py            # prints each cycle; exit 1 if any
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIPPED_DIRS = {".venv", ".run", "tests", "bench", "scripts", "migrations", "staticfiles", "node_modules", "deploy"}


def product_modules(root: Path) -> dict[str, Path]:
    """Map every product module's dotted name to its file."""
    modules: dict[str, Path] = {}
    for path in root.rglob("*.py"):
        relative = path.relative_to(root)
        if any(part in SKIPPED_DIRS or part.startswith(".") for part in relative.parts[:-1]):
            continue
        if len(relative.parts) == 1:
            continue  # manage.py and other top-level files belong to no app
        parts = list(relative.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported_names(path: Path, module: str) -> Iterable[str]:
    """Yield the dotted names a module imports, anywhere in it (relative imports resolved)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            # `from package import module` imports the submodule itself.
            yield from (f"{base}.{alias.name}" for alias in node.names)


def module_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Return module → the product modules it imports."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for target in imported_names(path, name):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                graph[name].add(target)
    return graph


def app_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Return app → the other apps its modules import."""
    apps: dict[str, set[str]] = {}
    for source, targets in graph.items():
        app = source.split(".")[0]
        apps.setdefault(app, set()).update(t.split(".")[0] for t in targets if t.split(".")[0] != app)
    return apps


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def main() -> int:
    graph = module_graph(product_modules(ROOT))
    problems = [("modules", c) for c in cycles(graph)] + [("apps", c) for c in cycles(app_graph(graph))]
    for kind, cycle in problems:
        print(f"import cycle between {kind}: {' ↔ '.join(cycle)}")
    if not problems:
        print(f"no import cycles ({len(graph)} modules)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
