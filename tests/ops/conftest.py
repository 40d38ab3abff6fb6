"""The staff pages' tests use the root conftest's fixtures: `make_rental` (any state, any fields), `enqueued`, `clock`.

No `__init__.py` in this folder on purpose: a `tests/ops` package would shadow the `ops` app.
"""
