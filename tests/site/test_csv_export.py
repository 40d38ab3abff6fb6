"""Every CSV the project writes goes through one writer, which neutralises cells a spreadsheet would run."""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from pathlib import Path

import pytest

from common.csv_export import csv_response
from tests.conftest import REPO_ROOT

PRODUCT_DIRS = ("accounts", "api", "billing", "common", "dashboard", "notifications", "ops", "rentals")


@pytest.mark.parametrize("text", ["=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1", '=HYPERLINK("http://x.invalid","x")'])
def test_a_text_a_spreadsheet_would_run_is_written_as_text(text: str) -> None:
    response = csv_response(filename="x.csv", header=["value"], rows=[[text]])
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[1] == ["'" + text]


def test_numbers_and_harmless_text_are_written_as_they_are() -> None:
    response = csv_response(filename="x.csv", header=["a", "b", "c"], rows=[[Decimal("-1.50"), -2, "acme-1"]])
    assert response.content.decode().splitlines()[1] == "-1.50,-2,acme-1"
    assert response["Content-Disposition"] == 'attachment; filename="x.csv"'


def test_no_module_writes_csv_but_the_one_writer() -> None:
    writers = [
        str(path.relative_to(REPO_ROOT))
        for folder in PRODUCT_DIRS
        for path in Path(REPO_ROOT, folder).rglob("*.py")
        if "csv.writer(" in path.read_text() or "csv.DictWriter(" in path.read_text()
    ]
    assert writers == ["common/csv_export.py"], "write CSV with common.csv_export.csv_response"
