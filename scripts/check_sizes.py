"""Fail when a product module or function grows past what a newcomer can read at once (run by `make lint`).

Limits: 400 lines a module (`rentals/upstream/__init__.py`, the one Lium client, may be longer) and 60 lines a function,
decorators and docstring included. Tests, benchmarks, scripts and migrations are left out.

    python scripts/check_sizes.py          # prints each module or function over its limit; exit 1 if any
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from check_import_cycles import ROOT, product_modules

MODULE_LIMIT = 400
FUNCTION_LIMIT = 60
LONGER_MODULES_ALLOWED = {"rentals.upstream"}


def oversized(module: str, path: Path) -> list[str]:
    """Return a line for the module and each function in it that is over its limit."""
    text = path.read_text()
    found = []
    lines = len(text.splitlines())
    if lines > MODULE_LIMIT and module not in LONGER_MODULES_ALLOWED:
        found.append(f"{path.relative_to(ROOT)}: {lines} lines (limit {MODULE_LIMIT})")
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = (node.end_lineno or node.lineno) - start + 1
            if length > FUNCTION_LIMIT:
                found.append(
                    f"{path.relative_to(ROOT)}:{node.lineno} {node.name}(): {length} lines (limit {FUNCTION_LIMIT})"
                )
    return found


def main() -> int:
    problems = [line for module, path in sorted(product_modules(ROOT).items()) for line in oversized(module, path)]
    print("\n".join(problems) or "no module or function over its limit")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
