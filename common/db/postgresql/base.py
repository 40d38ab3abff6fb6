"""Django's PostgreSQL backend, taking the connection pool's `check` from OPTIONS["pool"] as Django 6.1 does.

Django 5.2 passes its own `check` to psycopg's pool (a round trip on every loan, with CONN_HEALTH_CHECKS), so a
`check` in OPTIONS["pool"] fails with "got multiple values for keyword argument 'check'":
https://code.djangoproject.com/ticket/37075, fixed for Django 6.1 (django/django#21198). The project's check
(`common.db_pool`) saves the poll that round trip. Drop this module, and set ENGINE back, on Django 6.1;
`tests/site/test_pooled_connection_check.py` fails with Django's own backend.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base


class DatabaseWrapper(base.DatabaseWrapper):
    # The pool's attributes are Django 5.1's, not yet in django-stubs: hence the ignores.
    @property
    def pool(self) -> Any:
        options = self.settings_dict["OPTIONS"].get("pool")
        pools = self._connection_pools  # type: ignore[attr-defined]
        if not isinstance(options, dict) or "check" not in options or self.alias in pools:
            return super().pool  # type: ignore[misc]
        from psycopg_pool import ConnectionPool

        options = dict(options)
        connect_kwargs = {**self.get_connection_params(), "autocommit": True}  # Django sets it later on, as in 5.2
        pool = ConnectionPool(
            kwargs=connect_kwargs,
            open=False,  # as Django: opened on first use, not at startup
            configure=self._configure_connection,  # type: ignore[attr-defined]
            check=options.pop("check"),
            **options,
        )
        # setdefault: threads racing here at startup keep the first pool, as Django does.
        return pools.setdefault(self.alias, pool)
