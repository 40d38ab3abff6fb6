"""One writer of rental state: only `rentals/transitions.py` changes a rental's status, lease or version.

The README says every state change goes through `rentals.transitions` (checked, recorded, announced). This
reads the product code (no import, no database) and fails on any other module that writes those columns:
an `update()`, `save()`, `bulk_update()` or `update_or_create()` on a `Rental` (or a queryset or instance
of one) naming them, any `F("version")`, or raw SQL updating the rentals table. Creating a rental is not a
change and is allowed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from rentals.transitions import STATE_FIELDS, IllegalTransition, rental_touch

ROOT = Path(__file__).resolve().parents[2]
NOT_PRODUCT = {".venv", ".run", "tests", "bench", "scripts", "migrations", "staticfiles", "node_modules", "deploy"}
THE_WRITER = Path("rentals/transitions.py")
# Queryset methods that still return rentals (an instance or a queryset of them).
KEEPS_RENTALS = {
    "all",
    "annotate",
    "defer",
    "distinct",
    "exclude",
    "filter",
    "first",
    "get",
    "last",
    "latest",
    "only",
    "order_by",
    "prefetch_related",
    "select_for_update",
    "select_related",
    "using",
}


def _is_rental_name(name: str, known: set[str]) -> bool:
    return name in known or "rental" in name.lower()


def _holds_rentals(node: ast.expr, known: set[str]) -> bool:
    """Return whether the expression is `Rental`, its manager, or a rental queryset or instance."""
    if isinstance(node, ast.Name):
        return _is_rental_name(node.id, known)
    if isinstance(node, ast.Attribute):
        # `Rental.objects` is; `rental.members` or `rental.credential` leads to another model.
        return node.attr == "objects" and _holds_rentals(node.value, known)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in KEEPS_RENTALS and _holds_rentals(node.func.value, known)
    if isinstance(node, ast.Subscript):
        return _holds_rentals(node.value, known)
    return False


def _rental_variables(tree: ast.AST) -> set[str]:
    """Return the names bound to rentals anywhere in the module (assignments and loops, to a fixed point)."""
    known: set[str] = set()
    while True:
        before = len(known)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if _holds_rentals(node.value, known):
                    known |= {t.id for t in targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                if _holds_rentals(node.iter, known):
                    known.add(node.target.id)
        if len(known) == before:
            return known


def _named_fields(call: ast.Call, keyword: str, position: int) -> set[str] | None:
    """Return the literal field names passed as `keyword` (or at `position`), or None when not literal."""
    value = next((k.value for k in call.keywords if k.arg == keyword), None)
    if value is None and len(call.args) > position:
        value = call.args[position]
    if value is None:
        return None
    try:
        return set(ast.literal_eval(value))
    except ValueError:
        return None


def _writes_state(call: ast.Call, method: str) -> bool:
    if method == "update":
        if any(k.arg is None for k in call.keywords):
            return True  # a `**fields` that cannot be read here
        return bool(STATE_FIELDS & {k.arg for k in call.keywords if k.arg})
    if method == "save":
        fields = _named_fields(call, "update_fields", position=99)
        return fields is None or bool(STATE_FIELDS & fields)  # a full save writes every column
    if method == "bulk_update":
        fields = _named_fields(call, "fields", position=1)
        return fields is None or bool(STATE_FIELDS & fields)
    return method == "update_or_create"


def _is_version_expression(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "F"
        and any(isinstance(a, ast.Constant) and a.value == "version" for a in node.args)
    )


def _is_raw_rental_update(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and "update rentals_rental" in " ".join(node.value.lower().split())
    )


def state_writes(source: str) -> list[str]:
    """Return a line for each write of a rental's status, lease or version in the source."""
    tree = ast.parse(source)
    known = _rental_variables(tree)
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and _holds_rentals(node.func.value, known)
            and _writes_state(node, node.func.attr)
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node)[:120]}")
        if _is_version_expression(node):
            found.append(f"line {getattr(node, 'lineno', '?')}: F('version')")
        if _is_raw_rental_update(node):
            found.append(f"line {getattr(node, 'lineno', '?')}: raw SQL updating rentals_rental")
    return found


def product_files() -> list[Path]:
    files = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if len(relative.parts) > 1 and not any(p in NOT_PRODUCT or p.startswith(".") for p in relative.parts[:-1]):
            files.append(relative)
    return files


def test_only_transitions_writes_rental_state() -> None:
    files = product_files()
    assert THE_WRITER in files and Path("rentals/engine.py") in files, "the walk must see the product code"
    offenders = {
        str(path): found for path in files if path != THE_WRITER and (found := state_writes((ROOT / path).read_text()))
    }
    assert offenders == {}, "write rental state through rentals.transitions (rental_transition, rental_touch)"


@pytest.mark.parametrize(
    "source",
    [
        "Rental.objects.filter(pk=1, status='queued').update(status='sending')",
        "rows = Rental.objects.filter(pk=1)\nrows = rows.filter(status='x')\nrows.update(lease_until=None)",
        "Rental.objects.filter(pk=1).update(updated_at=now, **fields)",
        "def f(rental):\n    rental.status = 'ready'\n    rental.save()",
        "for r in Rental.objects.all():\n    r.save(update_fields=['version'])",
        "Rental.objects.bulk_update(rentals, ['lease_token'])",
        "Other.objects.filter(pk=1).update(version=F('version') + 1)",
        "cursor.execute('UPDATE  rentals_rental SET status = %s', ['x'])",
    ],
)
def test_the_check_finds_a_state_write(source: str) -> None:
    assert state_writes(source), source


@pytest.mark.parametrize(
    "source",
    [
        "Rental.objects.create(status='queued', version=1)",
        "Rental.objects.filter(pk=1).update(cluster_id='c')",
        "for member in rental.members.all():\n    member.status = 'RUNNING'\n    member.save()",
        "rental.save(update_fields=['removal_scheduled_at'])",
        "Delivery.objects.filter(pk=1).update(status='done')",
    ],
)
def test_the_check_leaves_other_writes_alone(source: str) -> None:
    assert state_writes(source) == [], source


@pytest.mark.parametrize("field", sorted(STATE_FIELDS))
def test_touch_refuses_a_state_field(field: str) -> None:
    with pytest.raises(IllegalTransition):
        rental_touch(rental_id=1, **{field: None})


@pytest.mark.django_db
def test_saving_a_rental_in_the_admin_writes_nothing(make_rental, client_for) -> None:  # type: ignore[no-untyped-def]
    """A full save from the admin's change page would write back status, lease and version as it read them."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.conftest import _user

    rental = make_rental()
    client = client_for(_user("root", superuser=True))
    url = f"/admin/rentals/rental/{rental.pk}/change/"
    shown = client.get(url)
    assert shown.status_code == 200, "staff still read the rental in the admin"
    page = shown.content.decode()
    # What the browser would send: every field of the page's form (the inlines' management forms included).
    submitted = dict(re.findall(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', page))
    with CaptureQueriesContext(connection) as queries:
        client.post(url, {**submitted, "_save": "Save"})
    writes = [q["sql"] for q in queries if q["sql"].upper().startswith('UPDATE "RENTALS_RENTAL"')]
    assert writes == []
