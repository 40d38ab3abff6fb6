#!/usr/bin/env python
"""Benchmarks against the real stack: gunicorn, the simulator, real Celery workers, the configured database.

    make bench
    make bench BENCH_ARGS="--submit-rentals 300 --poll-seconds 15 --search-rows 100000,1000000"
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/lium_bench CELERY_BROKER_URL=redis://127.0.0.1:6379/14 make bench

It starts, in a temporary run folder, its own simulator, gunicorn (deploy/gunicorn.conf.py, bench URLconf)
and Celery workers, on its own database: SQLite in the run folder, or, when DATABASE_URL is PostgreSQL, a
dedicated database on that server (`--db-name`, default lium_bench; dropped and created at the start,
dropped at the end unless `--keep-db`). The broker is CELERY_BROKER_URL (default: the embedded file-system
transport). Every child process is stopped at the end or on error. The last line of output is one JSON
object holding every figure; bench/README.md explains them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.context import PHASES, Run, Stack  # noqa: E402 - the repository is put on the path just above
from bench.figures import r  # noqa: E402
from bench.stack import start_stack  # noqa: E402
from scripts.harness import Processes, children_of, interrupt_on, peak_rss_mb, say  # noqa: E402

HARD_DEADLINE_SECONDS = 30 * 60


def main(argv: list[str] | None = None) -> int:
    """Run the bench; print a summary and, last, one JSON line of every figure. Exit 0, or 1 on failure."""
    run = begin_run(parse_args(argv))
    try:
        if "listing" in run.phases:  # needs no stack: its children serve and read the listing themselves
            from bench.phases.listing import measure_listing

            measure_listing(run)
        if run.phases - {"listing"}:
            stack = start_stack(run)
            measure_phases(run, stack)
            record_web_memory(run, stack)
        finish_figures(run)
        print_summary(run)
        return 0
    except KeyboardInterrupt:
        run.result["error"] = "interrupted"
        return 1
    except Exception as exc:  # report, clean up, and still end with the JSON line
        traceback.print_exc()
        run.result["error"] = f"{type(exc).__name__}: {exc}"
        return 1
    finally:
        end_run(run)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="bench/run.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--submit-rentals", type=int, default=200, help="rentals for the submit-to-upstream latency")
    p.add_argument("--poll-seconds", type=float, default=10.0, help="seconds per poll load run (one per round)")
    p.add_argument("--poll-clients", type=int, default=50, help="concurrent clients for the poll benchmark")
    p.add_argument("--poll-rounds", type=int, default=5, help="rounds of the poll benchmark (ratio: median of rounds)")
    p.add_argument("--page-rows", default="10000,100000", help="rental counts for the page-cost benchmark")
    p.add_argument("--page-samples", type=int, default=40, help="requests per page and size (median, p95)")
    p.add_argument(
        "--search-rows",
        default="100000",
        help="rental counts for the support search (PostgreSQL only), e.g. 100000,1000000",
    )
    p.add_argument("--search-samples", type=int, default=40, help="searches per identifier kind and size")
    p.add_argument("--engine-rentals", type=int, default=60, help="rentals per worker count for engine throughput")
    p.add_argument("--engine-workers", default="1,2,4", help="worker process counts for engine throughput")
    p.add_argument(
        "--submit-budget",
        type=float,
        default=150.0,
        help="seconds at most for the submit phase (the embedded broker is slow: fewer rentals then)",
    )
    p.add_argument("--engine-budget", type=float, default=45.0, help="seconds at most per engine run")
    p.add_argument("--ready-rentals", type=int, default=20, help="clusters rented for the time to ready")
    p.add_argument("--ready-start-seconds", type=float, default=5.0, help="the simulator's pod start delay then")
    p.add_argument("--ready-interval", type=float, default=0.5, help="seconds between the time to ready's submits")
    p.add_argument("--ready-budget", type=float, default=120.0, help="seconds at most to wait for them all")
    p.add_argument("--burst-rentals", type=int, default=200, help="rentals submitted at once in the burst phase")
    p.add_argument(
        "--burst-latency-ms", type=int, default=2000, help="how long the simulator holds each rent call in the burst"
    )
    p.add_argument(
        "--fs-polling-interval",
        type=float,
        default=None,
        help="experiment: the file-system broker's polling interval (not the project's setting)",
    )
    p.add_argument("--fabrics", type=int, default=64)
    p.add_argument("--nodes-per-fabric", type=int, default=32)
    p.add_argument("--web-workers", type=int, default=2, help="gunicorn workers (WEB_CONCURRENCY)")
    p.add_argument("--web-threads", type=int, default=4, help="gunicorn threads per worker")
    p.add_argument(
        "--load-tool",
        choices=["auto", "wrk", "python"],
        default="auto",
        help="auto: wrk if installed (installed with apt-get when root), else the Python client",
    )
    p.add_argument("--db-name", default="lium_bench", help="dedicated database name on the PostgreSQL server")
    p.add_argument("--keep-db", action="store_true", help="keep the PostgreSQL bench database at the end")
    p.add_argument("--keep-run-dir", action="store_true", help="keep the run folder (logs) at the end")
    p.add_argument("--listing-pods", type=int, default=20_000, help="pods in the listing phase's GET /pods")
    p.add_argument(
        "--only",
        default="",
        help="comma list of phases: submit,engine,ready,burst,poll,pages,search,listing (default all)",
    )
    return p.parse_args(argv)


def begin_run(args: argparse.Namespace) -> Run:
    """Make the run folder and arm the hard deadline: whatever happens, the run ends and cleans up."""
    run_dir = Path(tempfile.mkdtemp(prefix="bench-"))
    run = Run(
        args=args,
        phases=set(filter(None, args.only.split(","))) or set(PHASES),
        run_dir=run_dir,
        procs=Processes(run_dir),
        started=time.monotonic(),
    )
    interrupt_on(signal.SIGTERM, signal.SIGALRM)
    signal.alarm(HARD_DEADLINE_SECONDS)
    return run


def measure_phases(run: Run, stack: Stack) -> None:
    """Log the people in and run every phase asked for, in the order that leaves the others' data alone."""
    # The phases import models, which only a set-up Django can load.
    from bench.direct import Direct
    from bench.people import create_people
    from bench.phases.burst import measure_burst
    from bench.phases.engine import measure_engine
    from bench.phases.poll import measure_poll
    from bench.phases.ready import measure_ready
    from bench.phases.scale import measure_at_scale
    from bench.phases.submit import measure_submit
    from bench.workers import MeasuredWorker

    people = create_people(stack)
    direct = Direct(stack.sim, people.template_id)
    worker = MeasuredWorker(run.procs, stack.child_env)
    if "submit" in run.phases:
        measure_submit(run, stack, people, direct, worker)
    if "engine" in run.phases:
        measure_engine(run, people, direct, worker)
    if "ready" in run.phases:
        measure_ready(run, stack, people, direct, worker)
    worker.stop()
    if "burst" in run.phases:
        measure_burst(run, stack, people, direct)
    run.result["memory"] = {
        "celery_pool_peak_rss_mb": worker.peak_pool_mb or None,
        "celery_main_peak_rss_mb": worker.peak_main_mb or None,
    }
    if "poll" in run.phases:
        measure_poll(run, stack, people)
    measure_at_scale(run, people)


def record_web_memory(run: Run, stack: Stack) -> None:
    """Record the gunicorn master's and workers' peak memory."""
    memory = run.result["memory"]
    web_workers = children_of(stack.gunicorn.pid)
    memory["gunicorn_worker_peak_rss_mb"] = max((peak_rss_mb(p) or 0 for p in web_workers), default=None)
    memory["gunicorn_workers"] = {str(p): peak_rss_mb(p) for p in web_workers}
    memory["gunicorn_master_peak_rss_mb"] = peak_rss_mb(stack.gunicorn.pid)
    run.summary.append(
        (
            "peak RSS web worker / celery pool (MB)",
            f"{memory['gunicorn_worker_peak_rss_mb']} / {memory['celery_pool_peak_rss_mb']}",
        )
    )


def finish_figures(run: Run) -> None:
    run.result["ok"] = True
    run.result["duration_s"] = r(time.monotonic() - run.started, 1)


def print_summary(run: Run) -> None:
    """Print the stack, the machine and every summary line, for a person reading the console."""
    result, stack, machine = run.result, run.result.get("stack"), run.result.get("machine")
    say("\n" + "=" * 100)
    if stack:
        say(f"stack: {stack['database']} | broker {stack['broker']} | cache {stack['cache']} | {stack['web']}")
    if machine:
        say(f"machine: {machine['cpu']} x{machine['cpus']}, {machine['mem_gb']} GB")
    for label, value in run.summary:
        say(f"  {label:45s} {value}")
    if "ops" in result:
        say(f"  {'ops pages':45s} {result['ops']}")
    if isinstance(result.get("search"), dict) and "skipped" in result["search"]:
        say(f"  {'support search':45s} skipped: {result['search']['skipped']}")
    say(f"  {'duration (s)':45s} {result['duration_s']}")
    say("=" * 100)


def end_run(run: Run) -> None:
    """Stop every child, drop the scratch database, remove the run folder, and print the JSON line."""
    signal.alarm(0)
    run.procs.stop_all()
    try:
        from django.db import connections

        connections.close_all()
    except Exception:  # noqa: S110 - Django may never have been set up
        pass
    if run.scratch is not None and not run.args.keep_db:
        try:
            run.scratch.drop()
        except Exception as exc:
            say(f"note: could not drop {run.scratch.name}: {exc}")
    if run.args.keep_run_dir or not run.result.get("ok"):
        say(f"run folder kept: {run.run_dir}")
    else:
        shutil.rmtree(run.run_dir, ignore_errors=True)
    run.result.setdefault("duration_s", r(time.monotonic() - run.started, 1))
    print(json.dumps(run.result, default=str), flush=True)


if __name__ == "__main__":
    sys.exit(main())
