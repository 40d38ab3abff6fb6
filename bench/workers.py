"""The bench's Celery worker: one `celery worker --beat` at a time, its peak memory kept across restarts."""

from __future__ import annotations

import subprocess

from scripts.harness import (
    Processes,
    celery_worker_args,
    children_of,
    peak_rss_mb,
    procfile_workers,
    wait_for_log_line,
)


class MeasuredWorker:
    """One `celery worker` (with beat, hence the sweeper) with N pool processes; peak memory kept."""

    def __init__(self, procs: Processes, env: dict[str, str]) -> None:
        self.procs = procs
        self.env = env
        self.process: subprocess.Popen | None = None
        self.peak_main_mb = 0.0
        self.peak_pool_mb = 0.0
        self.count = 0

    def start(self, concurrency: int) -> None:
        """Stop the running worker, if any, and start one with `concurrency` pool processes; wait until ready."""
        self.stop()
        self.count += 1
        log_name = f"worker-{self.count}.log"
        # Processes, as these phases were measured before the queues split (the burst phase runs the Procfile's).
        # `--pool=prefork` would mean "the configured pool" to Celery, so the setting says prefork.
        args = celery_worker_args(concurrency=concurrency, beat_schedule=self.procs.run_dir / f"beat-{self.count}")
        self.process = self.procs.start(args, log_name=log_name, env={**self.env, "CELERY_WORKER_POOL": "prefork"})
        wait_for_log_line(self.procs.run_dir / log_name, " ready.", process=self.process, timeout=60)

    def sample_memory(self) -> None:
        """Keep the highest peak memory seen so far of the main and the pool processes."""
        if self.process is None or self.process.poll() is not None:
            return
        main = peak_rss_mb(self.process.pid) or 0.0
        pool = [peak_rss_mb(pid) or 0.0 for pid in children_of(self.process.pid)]
        self.peak_main_mb = max(self.peak_main_mb, main)
        self.peak_pool_mb = max([self.peak_pool_mb, *pool])

    def stop(self) -> None:
        """Sample the worker's memory one last time, then stop it."""
        if self.process is not None:
            self.sample_memory()
            Processes.stop(self.process)
            self.process = None


class ProcfileWorkers:
    """Every worker of the Procfile, started exactly as `make run` starts them (queues, pools, concurrency)."""

    def __init__(self, procs: Processes, env: dict[str, str]) -> None:
        self.procs = procs
        self.env = env
        self.commands = procfile_workers(env)
        self.processes: dict[str, subprocess.Popen] = {}
        self.peak_mb: dict[str, float] = {}

    def start(self) -> None:
        """Start them all and wait until each is ready."""
        for name, args in self.commands.items():
            self.processes[name] = self.procs.start(args, log_name=f"{name}.log", env=self.env)
        for name, process in self.processes.items():
            wait_for_log_line(self.procs.run_dir / f"{name}.log", " ready.", process=process, timeout=60)

    def sample_memory(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is None:
                self.peak_mb[name] = max(self.peak_mb.get(name, 0.0), peak_rss_mb(process.pid) or 0.0)

    def described(self) -> dict[str, object]:
        """Return each worker's command line (after `celery`) and peak memory."""
        return {
            name: {"args": " ".join(args[args.index("worker") :]), "peak_rss_mb": self.peak_mb.get(name)}
            for name, args in self.commands.items()
        }

    def stop(self) -> None:
        for process in self.processes.values():
            Processes.stop(process)
        self.processes.clear()
