"""The one CSV writer of the project: every CSV download goes through `csv_response`.

A spreadsheet runs a cell that starts with = + - @ (or a tab or carriage return before one) as a formula, so
`=HYPERLINK(...)` in a customer's name would become a live link in whoever opens the file. Such a text cell
is written with a leading apostrophe, which spreadsheets show as text (OWASP's "CSV injection" advice).
Numbers are written as they are: -1.50 in a number cell is a value, not a formula.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence

from django.http import HttpResponse

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """Return the value as the CSV carries it: a text a spreadsheet would run gets a leading apostrophe."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_response(*, filename: str, header: Sequence[str], rows: Iterable[Sequence[object]]) -> HttpResponse:
    """Return a CSV attachment named `filename` with the header and rows, every text cell neutralised."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response)
    writer.writerow([csv_cell(cell) for cell in header])
    writer.writerows([csv_cell(cell) for cell in row] for row in rows)
    return response
