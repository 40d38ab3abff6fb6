"""Gunicorn settings for the dashboard's web container; every knob can be set from the environment.

WEB_CONCURRENCY              worker processes (0 or unset: 2 x usable CPUs + 1, at most 8)
GUNICORN_THREADS             threads per worker (default 4; >1 selects the gthread worker)
GUNICORN_TIMEOUT             seconds before a silent worker is killed (default: 2 x LIUM_TIMEOUT_SECONDS, >= 60)
GUNICORN_GRACEFUL_TIMEOUT    seconds a worker gets to finish its requests on shutdown/restart (default 30)
GUNICORN_KEEPALIVE           keep-alive seconds (default 5, suits a reverse proxy in front)
GUNICORN_MAX_REQUESTS        recycle a worker after this many requests, 0 = never (default 1000)
GUNICORN_LOG_LEVEL           error-log level (default info)
GUNICORN_BIND                listen address (default 0.0.0.0:8000)
FORWARDED_ALLOW_IPS          proxies whose X-Forwarded-* gunicorn trusts (default 127.0.0.1)
"""

import math
import os
import sys


def _env_int(name: str, default: int) -> int:
    """An integer from the environment; unset or empty means the default."""
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else default


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    return float(raw) if raw else default


def _usable_cpus() -> int:
    """CPUs this container may use: the affinity mask, lowered by a cgroup v2/v1 CPU quota if one is set."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = None
    try:
        with open("/sys/fs/cgroup/cpu.max") as fh:  # cgroup v2: "<quota> <period>" or "max <period>"
            q, p = fh.read().split()[:2]
            if q != "max":
                quota = int(q) / int(p)
    except (OSError, ValueError):
        try:  # cgroup v1
            with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as fq, open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as fp:
                q1, p1 = int(fq.read()), int(fp.read())
                if q1 > 0 and p1 > 0:
                    quota = q1 / p1
        except (OSError, ValueError):
            pass
    if quota is not None:
        cpus = min(cpus, max(1, math.ceil(quota)))
    return max(1, cpus)


MAX_DEFAULT_WORKERS = 8

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
wsgi_app = "dashboard.wsgi:application"

# 0 means "choose": compose passes 0 rather than an empty value, which gunicorn's own int() would refuse.
workers = _env_int("WEB_CONCURRENCY", 0) or min(2 * _usable_cpus() + 1, MAX_DEFAULT_WORKERS)
threads = _env_int("GUNICORN_THREADS", 4)
# Views wait on the upstream (I/O bound): threads give concurrency cheaply.
worker_class = "gthread" if threads > 1 else "sync"

# The upstream client abandons a call after LIUM_TIMEOUT_SECONDS overall (every redirect hop and the whole
# body); a request may make more than one upstream call, so the worker timeout is well above it: the client's
# error page, not a killed worker, is what the user should see.
_lium_timeout = _env_float("LIUM_TIMEOUT_SECONDS", 30.0)
timeout = _env_int("GUNICORN_TIMEOUT", max(60, math.ceil(2 * _lium_timeout)))
if timeout <= _lium_timeout:
    print(
        f"gunicorn.conf: GUNICORN_TIMEOUT={timeout} is not above LIUM_TIMEOUT_SECONDS={_lium_timeout:g}; "
        "slow upstream calls will kill workers",
        file=sys.stderr,
    )
graceful_timeout = _env_int("GUNICORN_GRACEFUL_TIMEOUT", 30)
keepalive = _env_int("GUNICORN_KEEPALIVE", 5)

# Recycle workers now and then (bounded memory growth); the jitter keeps them from restarting together.
max_requests = _env_int("GUNICORN_MAX_REQUESTS", 1000)
max_requests_jitter = _env_int("GUNICORN_MAX_REQUESTS_JITTER", 100)

# Request limits: the dashboard takes small forms and htmx requests only.
limit_request_line = 4094  # bytes in the request line (method + URL + version)
limit_request_fields = 100  # number of headers
limit_request_field_size = 8190  # bytes in one header

# The heartbeat file lives in memory: a slow container disk must not make workers look dead.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None  # noqa: S108 - gunicorn's documented choice

forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")

# Logs go to the container's stdout/stderr.
accesslog = "-"
errorlog = "-"
loglevel = os.environ.get("GUNICORN_LOG_LEVEL", "info")
access_log_format = '%(h)s fwd="%({x-forwarded-for}i)s" "%(r)s" %(s)s %(B)s %(M)sms "%(a)s"'
capture_output = False
# Invitation links carry a token in their path: it never reaches these logs (common/logredact.py).
logger_class = "common.gunicorn_logger.RedactingLogger"
proc_name = "lium-dashboard"


def post_worker_init(worker: object) -> None:
    """Leave the objects the app loaded at start-up out of the garbage collector's full passes.

    A loaded Django process holds about 100,000 objects that live as long as it does; a full collection walks
    them all (about 60 ms on a 2-core machine) and lands on whichever request is running: the slowest 1-5%
    of requests were these pauses. Frozen, they are never walked; what requests allocate is collected as before.
    """
    import gc

    gc.freeze()
