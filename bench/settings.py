"""Bench-only settings: the project's settings, with a URLconf that adds one trivial reference view.

Nothing else changes, so the trivial view runs behind exactly the same middleware, database and cache as
the pages it is compared with.
"""

import os

from dashboard.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"

# Experiment knob, off by default: the file-system transport's polling interval (the project's default is
# Kombu's 1 s). `bench/run.py --fs-polling-interval 0.1` uses it to measure a proposed settings change.
if CELERY_BROKER_URL.startswith("filesystem://") and os.environ.get("BENCH_FS_POLLING_INTERVAL"):  # noqa: F405
    CELERY_BROKER_TRANSPORT_OPTIONS["polling_interval"] = float(os.environ["BENCH_FS_POLLING_INTERVAL"])  # noqa: F405
