"""Rows read with written-out SQL, given the values the ORM would have given.

The staff pages write some reads out (composing and compiling them with the ORM cost more than running them);
the backend's own conversions still apply: SQLite keeps uuids as hex and times as text, PostgreSQL needs none.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection
from django.db.models import Field, Model


def converted(rows: Iterable[tuple[Any, ...]], model: type[Model], columns: dict[int, str]) -> list[tuple[Any, ...]]:
    """Return `rows` with the value at each position of `columns` converted as the ORM converts `model`'s field of
    that name."""
    convert = []
    for index, name in columns.items():
        field = model._meta.get_field(name)
        assert isinstance(field, Field)
        col = field.get_col(model._meta.db_table)
        converters = [*connection.ops.get_db_converters(col), *col.get_db_converters(connection)]
        if converters:
            convert.append((index, converters, col))
    if not convert:
        return list(rows)
    result = []
    for row in rows:
        values = list(row)
        for index, converters, col in convert:
            for converter in converters:
                values[index] = converter(values[index], col, connection)
        result.append(tuple(values))
    return result
