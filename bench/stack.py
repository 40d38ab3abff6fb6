"""The bench's stack: its own database and environment, Django, the simulator and gunicorn."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

from bench.context import RUN_ENV, Run, Stack
from bench.figures import machine
from scripts.harness import (
    ScratchPostgres,
    Simulator,
    django_setup_and_migrate,
    free_port,
    say,
    wait_for_http,
)


def start_stack(run: Run) -> Stack:
    """Choose the database and broker, set Django up on them, then start the simulator and gunicorn."""
    broker_url = configure_environment(run)
    sim = Simulator(
        run.procs,
        name="simulator",
        fabrics=run.args.fabrics,
        nodes_per_fabric=run.args.nodes_per_fabric,
        pods_rate_limit=0,
        env=dict(os.environ),
    )
    os.environ["LIUM_BASE_URL"] = f"{sim.url}/api"
    child_env = dict(os.environ)
    broker_label = start_django(run, broker_url)
    sim.start()
    web, gunicorn = start_gunicorn(run, child_env)
    say(f"simulator {sim.url}, gunicorn {web} (pid {gunicorn.pid})")
    return Stack(sim=sim, gunicorn=gunicorn, web=web, broker_label=broker_label, child_env=child_env)


def configure_environment(run: Run) -> str:
    """Point this process (and so every child) at the run's own database and the broker; return the broker URL."""
    given_db = os.environ.get("DATABASE_URL", "")
    if given_db.startswith(("postgres://", "postgresql://", "pgsql://")):
        run.scratch = ScratchPostgres(given_db, run.args.db_name)
        run.scratch.create(replace=True)
        db_url = run.scratch.url
    else:
        if given_db:
            say(f"note: DATABASE_URL {given_db.split(':')[0]}:... is neither PostgreSQL nor SQLite; using SQLite")
        db_url = f"sqlite:///{run.run_dir / 'db.sqlite3'}"
    broker_url = os.environ.get("CELERY_BROKER_URL", "") or "filesystem://"
    os.environ.update(RUN_ENV)
    if run.args.fs_polling_interval is not None:
        os.environ["BENCH_FS_POLLING_INTERVAL"] = str(run.args.fs_polling_interval)
    os.environ.update({"RUN_DIR": str(run.run_dir), "DATABASE_URL": db_url, "CELERY_BROKER_URL": broker_url})
    return broker_url


def start_django(run: Run, broker_url: str) -> str:
    """Set Django up and migrate, empty a shared broker, record the stack; return the broker's label."""
    django_setup_and_migrate()
    from django.conf import settings
    from django.db import connection

    if broker_url.startswith("filesystem://"):
        broker_label = f"embedded file-system transport ({run.run_dir / 'broker'})"
    else:
        broker_label = re.sub(r"//[^@/]*@", "//***@", broker_url)
        from dashboard.celery import app

        app.control.purge()
    caches: Any = settings.CACHES
    cache_backend = caches["default"]["BACKEND"].rsplit(".", 1)[-1]
    args = run.args
    run.result["stack"] = {
        "database": connection.vendor,
        "database_name": str(connection.settings_dict["NAME"]),
        "embedded_default": connection.vendor == "sqlite" and broker_url.startswith("filesystem://"),
        "broker": broker_label,
        "cache": cache_backend,
        "web": f"gunicorn -c deploy/gunicorn.conf.py, {args.web_workers} workers x {args.web_threads} threads",
        "simulator": f"{args.fabrics} fabrics x {args.nodes_per_fabric} nodes, replenish, pod limiter off",
    }
    run.result["machine"] = machine()
    say(f"database: {connection.vendor} ({connection.settings_dict['NAME']})")
    say(f"broker:   {broker_label}")
    say(f"cache:    {cache_backend}")
    say(f"run dir:  {run.run_dir}")
    return broker_label


def start_gunicorn(run: Run, child_env: dict[str, str]) -> tuple[str, subprocess.Popen]:
    """Start gunicorn on the bench settings and a free port; return its base URL and process once it answers."""
    port = free_port()
    web_env = {
        **child_env,
        "WEB_CONCURRENCY": str(run.args.web_workers),
        "GUNICORN_THREADS": str(run.args.web_threads),
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "GUNICORN_LOG_LEVEL": "warning",
        # Recycling would reset the peak memory figure and add restarts to the load runs.
        "GUNICORN_MAX_REQUESTS": "0",
        # One user submits 200 rentals in a few minutes here: the per-user limit is not measured.
        "RENT_SUBMIT_RATE_PER_MINUTE": "100000",
    }
    args = [sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py"]
    gunicorn = run.procs.start(args, log_name="gunicorn.log", env=web_env)
    web = f"http://127.0.0.1:{port}"
    wait_for_http(f"{web}/healthz", process=gunicorn)
    return web, gunicorn
