"""Settings of the apps: the Lium upstream, the rent engine, Celery, notifications and money.

Read through the same `env` as `dashboard.settings`, which takes every name defined here.
"""

from datetime import timedelta

from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured
from marshmallow.validate import Range

from dashboard.env import NOT_NEGATIVE, POSITIVE, PRODUCTION, RUN_DIR, env

# --- Upstream (Lium) ----------------------------------------------------------------------------------
LIUM_BASE_URL = env.str("LIUM_BASE_URL", "http://127.0.0.1:8100/api")
LIUM_TIMEOUT_SECONDS = env.float("LIUM_TIMEOUT_SECONDS", 30, validate=Range(min=0, min_inclusive=False))
LIUM_CONNECT_TIMEOUT_SECONDS = env.float("LIUM_CONNECT_TIMEOUT_SECONDS", 5, validate=Range(min=0, min_inclusive=False))
# How long the fabric listing is reused before the upstream is asked again (and a just-ordered node hidden).
LIUM_OFFERS_CACHE_SECONDS = env.int("LIUM_OFFERS_CACHE_SECONDS", 15, validate=NOT_NEGATIVE)
# Deployment estimates (rentals/estimates.py): a page waits at most this long for them, and reuses them this long.
LIUM_ESTIMATE_TIMEOUT_SECONDS = env.float(
    "LIUM_ESTIMATE_TIMEOUT_SECONDS", 2, validate=Range(min=0, max=30, min_inclusive=False)
)
LIUM_ESTIMATE_CACHE_SECONDS = env.int("LIUM_ESTIMATE_CACHE_SECONDS", 60, validate=NOT_NEGATIVE)
# Lium's cluster switch (`rentals.lium_switch`): read this often by beat; a queued rental waits at most this long
# for it to come back on, then is refused (nothing sent).
LIUM_SWITCH_READ_SECONDS = env.int("LIUM_SWITCH_READ_SECONDS", 60, validate=POSITIVE)
LIUM_SWITCH_MAX_WAIT_SECONDS = env.int("LIUM_SWITCH_MAX_WAIT_SECONDS", 3600, validate=POSITIVE)
# Changes made outside the dashboard (`ops.pod_events`): each credential's account events are followed this often;
# a backend that refuses events to API keys is asked again only after LIUM_EVENTS_REFUSED_RETRY_SECONDS.
LIUM_EVENTS_POLL_SECONDS = env.int("LIUM_EVENTS_POLL_SECONDS", 30, validate=POSITIVE)
LIUM_EVENTS_REFUSED_RETRY_SECONDS = env.int("LIUM_EVENTS_REFUSED_RETRY_SECONDS", 24 * 3600, validate=POSITIVE)

# --- Rent engine --------------------------------------------------------------------------------------
# Automatic retries stop inside the upstream's 24 h idempotency window; past this only a human decides.
RENT_RETRY_WINDOW = timedelta(seconds=min(env.int("RENT_RETRY_WINDOW_SECONDS", 2 * 3600, validate=POSITIVE), 23 * 3600))
RENT_MAX_ATTEMPTS = env.int("RENT_MAX_ATTEMPTS", 8, validate=POSITIVE)
RENT_BACKOFF_BASE_SECONDS = env.float("RENT_BACKOFF_BASE_SECONDS", 2, validate=NOT_NEGATIVE)
RENT_BACKOFF_CAP_SECONDS = env.float("RENT_BACKOFF_CAP_SECONDS", 120, validate=NOT_NEGATIVE)
# A worker holds a rental in `sending` for at most this long; past it the sweeper lets another worker retry.
RENT_LEASE_SECONDS = env.int("RENT_LEASE_SECONDS", int(LIUM_TIMEOUT_SECONDS) + 30, validate=POSITIVE)
# Every upstream call (all redirect hops and the whole body) is abandoned after LIUM_TIMEOUT_SECONDS; the lease
# must outlast it with room to record the answer, or a second worker could re-send while the first still waits.
# (2-10 s: the default lease, timeout + 30 s, always passes.)
RENT_LEASE_MARGIN_SECONDS = min(10.0, max(2.0, LIUM_TIMEOUT_SECONDS / 5))
if RENT_LEASE_SECONDS <= LIUM_TIMEOUT_SECONDS + RENT_LEASE_MARGIN_SECONDS:
    raise ImproperlyConfigured(
        f"RENT_LEASE_SECONDS ({RENT_LEASE_SECONDS}) must be greater than LIUM_TIMEOUT_SECONDS "
        f"({LIUM_TIMEOUT_SECONDS:g}) + {RENT_LEASE_MARGIN_SECONDS:g} s, the longest an upstream call may take plus "
        "room to claim and record it; raise RENT_LEASE_SECONDS or lower LIUM_TIMEOUT_SECONDS."
    )
# A `queued` rental whose message has not been picked up after this long is re-enqueued by the sweeper.
RENT_QUEUED_STUCK_SECONDS = env.int("RENT_QUEUED_STUCK_SECONDS", 30, validate=POSITIVE)
# The upstream caps pod listings at about 60 a minute per account; one poller per credential stays below.
POD_POLL_MIN_INTERVAL_SECONDS = env.float("POD_POLL_MIN_INTERVAL_SECONDS", 3, validate=NOT_NEGATIVE)
# A pod listing longer than this is refused whole (and raises an operator alert); it is read as it streams in.
POD_LISTING_MAX_PODS = env.int("POD_LISTING_MAX_PODS", 100_000, validate=POSITIVE)
SWEEP_INTERVAL_SECONDS = env.float("SWEEP_INTERVAL_SECONDS", 5, validate=Range(min=0, min_inclusive=False))
# Scheduled starts: how far ahead a rental may be ordered, and how often beat sends due ones (rentals.orders.scheduled).
SCHEDULE_MAX_DAYS = env.int("SCHEDULE_MAX_DAYS", 30, validate=Range(min=1, max=365))
SCHEDULE_SCAN_INTERVAL_SECONDS = env.float(
    "SCHEDULE_SCAN_INTERVAL_SECONDS", 15, validate=Range(min=0, min_inclusive=False)
)
# A `rented` rental whose members have not appeared after this long needs attention (and may be reconciled).
RENT_MEMBERS_GRACE_SECONDS = env.int("RENT_MEMBERS_GRACE_SECONDS", 600, validate=POSITIVE)
# While DELETE /clusters/{id} fails, one retry chain per rental backs off from the base to the cap.
CLUSTER_DELETE_BACKOFF_BASE_SECONDS = env.float("CLUSTER_DELETE_BACKOFF_BASE_SECONDS", 15, validate=POSITIVE)
CLUSTER_DELETE_BACKOFF_CAP_SECONDS = env.float("CLUSTER_DELETE_BACKOFF_CAP_SECONDS", 300, validate=POSITIVE)
# An `unknown` rental is looked for upstream by itself this many times, backing off from the base.
RECONCILE_LOOK_BASE_SECONDS = env.float("RECONCILE_LOOK_BASE_SECONDS", 15, validate=POSITIVE)
RECONCILE_MAX_LOOKS = env.int("RECONCILE_MAX_LOOKS", 6, validate=NOT_NEGATIVE)
# The ops overview flags rentals stuck this long in retrying, queued or terminating.
OPS_RETRYING_ATTENTION_MINUTES = env.int("OPS_RETRYING_ATTENTION_MINUTES", 15, validate=POSITIVE)
OPS_QUEUED_ATTENTION_MINUTES = env.int("OPS_QUEUED_ATTENTION_MINUTES", 5, validate=POSITIVE)
OPS_TERMINATING_ATTENTION_MINUTES = env.int("OPS_TERMINATING_ATTENTION_MINUTES", 15, validate=POSITIVE)
# The overview's figures are computed once for every staff member and process, then kept this long.
OPS_OVERVIEW_CACHE_SECONDS = env.int("OPS_OVERVIEW_CACHE_SECONDS", 20, validate=POSITIVE)
# The fabric check passes when its all-reduce reaches this share of link rate x GPUs per node (rentals/fabric_check).
FABRIC_CHECK_FLOOR_FRACTION = env.float(
    "FABRIC_CHECK_FLOOR_FRACTION", 0.7, validate=Range(min=0, max=1, min_inclusive=False)
)
# The fabric check's all-reduce is ended on the node after this long; a check running longer than the stale time
# (its worker died) is taken over by the next message or the sweeper (rentals.verification.perform).
FABRIC_CHECK_ALLREDUCE_SECONDS = env.int("FABRIC_CHECK_ALLREDUCE_SECONDS", 300, validate=POSITIVE)
FABRIC_CHECK_STALE_SECONDS = env.int("FABRIC_CHECK_STALE_SECONDS", 1800, validate=POSITIVE)

# Rent calls in flight (rentals in `sending` with a valid lease), counted in the database so the caps hold
# across worker processes and machines (`rentals.capacity`). Lium publishes no rent-rate limit; the defaults
# let a burst of 200 rentals go out at once with the shipped rent worker (RENT_WORKER_CONCURRENCY, 256).
RENT_INFLIGHT_PER_CREDENTIAL = env.int("RENT_INFLIGHT_PER_CREDENTIAL", 256, validate=POSITIVE)
RENT_INFLIGHT_GLOBAL = env.int("RENT_INFLIGHT_GLOBAL", 512, validate=POSITIVE)

# --- Celery -------------------------------------------------------------------------------------------
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {}
CELERY_BROKER_TRANSPORT: str | None = None  # the URL's scheme names the transport
if CELERY_BROKER_URL.startswith("filesystem://"):
    # Kombu's file-system transport, except that a worker never reads a message half-written (kombu #1551).
    CELERY_BROKER_TRANSPORT = "common.filesystem_broker:Transport"
    _broker_dir = RUN_DIR / "broker"
    # The file-system transport neither creates its folders nor works without them (web and worker both
    # publish), so make them here, once, wherever these settings are loaded.
    for _folder in ("queue", "processed", "control"):
        (_broker_dir / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        # Look for new messages every 0.1 s (the default 1 s adds up to a second to every hop of a rental).
        "polling_interval": 0.1,
        "store_processed": False,
    }
else:
    # An unacknowledged message comes back after this long; it must exceed the longest countdown we use
    # and any task's run time, or a slow task would be delivered twice (harmless, but wasteful).
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
# Let Django's LOGGING (JSON in production, with the bound context) format the worker's lines too.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# Prefetch 1: a worker holds at most one unacknowledged message per process, so a crash strands nothing
# else. The embedded file-system broker is the exception: it never redelivers anyway (the sweeper does),
# and Celery's loop for such transports performs late acknowledgements only between 2 s waits, so with
# prefetch 1 a worker would finish one task per process every 2 s.
CELERY_WORKER_PREFETCH_MULTIPLIER = 16 if CELERY_BROKER_URL.startswith("filesystem://") else 1
CELERY_TASK_IGNORE_RESULT = True
# Threads: a rent call waits on Lium, so one process holds many calls in flight. Celery's threads pool plus a
# wake-up of the worker's event loop when a task finishes (without it a Redis worker whose prefetch window was
# full waited up to 10 s per message); see common/celery_pool.py. Set here because `--pool` takes only
# Celery's own pool names: the worker command lines give no `--pool`.
CELERY_WORKER_POOL = env.str("CELERY_WORKER_POOL", "common.celery_pool:TaskPool")
# Three queues, each with its own workers (Procfile, docker-compose.yml): a flood of rent calls never delays
# pod tracking or the sweeper. Routed by task name, so `send_task` (rentals.enqueue) is routed too. Anything
# unnamed goes to housekeeping, whose worker also drains `celery`, the queue of releases before the split.
RENT_QUEUE, TRACKING_QUEUE, HOUSEKEEPING_QUEUE = "rent", "tracking", "housekeeping"
FABRIC_CHECK_QUEUE = "fabric_check"  # a check holds SSH sessions for minutes, never ahead of the others
CELERY_TASK_DEFAULT_QUEUE = HOUSEKEEPING_QUEUE
CELERY_TASK_ROUTES = {
    "rentals.tasks.rental_send": {"queue": RENT_QUEUE},
    "rentals.tasks.credential_pods_sync": {"queue": TRACKING_QUEUE},
    "rentals.tasks.rental_fabric_check": {"queue": FABRIC_CHECK_QUEUE},
    "rentals.tasks.rentals_sweep": {"queue": HOUSEKEEPING_QUEUE},
    "rentals.tasks.rental_delete_cluster": {"queue": HOUSEKEEPING_QUEUE},
    "rentals.tasks.rental_reconcile_look": {"queue": HOUSEKEEPING_QUEUE},
    "rentals.tasks.rental_removal_push": {"queue": HOUSEKEEPING_QUEUE},
    "rentals.tasks.sqlite_analyze": {"queue": HOUSEKEEPING_QUEUE},
    "rentals.tasks.member_events_fetch": {"queue": HOUSEKEEPING_QUEUE},
    "rentals.tasks.member_repair_send": {"queue": TRACKING_QUEUE},
    "rentals.tasks.member_reset_gpu_poll": {"queue": TRACKING_QUEUE},
    "rentals.tasks.cluster_switch_read": {"queue": HOUSEKEEPING_QUEUE},
    "rentals.tasks.scheduled_rentals_send": {"queue": HOUSEKEEPING_QUEUE},
    "ops.tasks.pod_events_follow_all": {"queue": HOUSEKEEPING_QUEUE},
    "ops.tasks.credential_events_follow": {"queue": TRACKING_QUEUE},
    "billing.tasks.budgets_scan": {"queue": HOUSEKEEPING_QUEUE},
    "billing.tasks.runway_check": {"queue": HOUSEKEEPING_QUEUE},
    "billing.tasks.statement_check": {"queue": HOUSEKEEPING_QUEUE},
    "notifications.tasks.delivery_send": {"queue": HOUSEKEEPING_QUEUE},
    "notifications.tasks.deliveries_sweep": {"queue": HOUSEKEEPING_QUEUE},
    "notifications.tasks.removal_soon_scan": {"queue": HOUSEKEEPING_QUEUE},
}
CELERY_RESULT_BACKEND = None
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(RUN_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE = {
    "sweep-rentals": {"task": "rentals.tasks.rentals_sweep", "schedule": SWEEP_INTERVAL_SECONDS},
    "scheduled-rentals": {"task": "rentals.tasks.scheduled_rentals_send", "schedule": SCHEDULE_SCAN_INTERVAL_SECONDS},
    # SQLite keeps no planner statistics by itself (a no-op on PostgreSQL); see rentals.tasks.sqlite_analyze.
    "sqlite-analyze": {"task": "rentals.tasks.sqlite_analyze", "schedule": 3600.0},
    "lium-switch-read": {"task": "rentals.tasks.cluster_switch_read", "schedule": float(LIUM_SWITCH_READ_SECONDS)},
    # One follow per credential of its account events, on the tracking queue (ops.tasks).
    "pod-events-follow": {"task": "ops.tasks.pod_events_follow_all", "schedule": float(LIUM_EVENTS_POLL_SECONDS)},
}

# --- Webhooks and e-mail (notifications) ----------------------------------------------------------------
# Webhooks go to https URLs on public addresses only in production; the demo's receivers run on 127.0.0.1.
WEBHOOK_REQUIRE_HTTPS = env.bool("WEBHOOK_REQUIRE_HTTPS", PRODUCTION)
WEBHOOK_ALLOW_PRIVATE_ADDRESSES = env.bool("WEBHOOK_ALLOW_PRIVATE_ADDRESSES", not PRODUCTION)
WEBHOOK_CONNECT_TIMEOUT_SECONDS = env.float(
    "WEBHOOK_CONNECT_TIMEOUT_SECONDS", 5, validate=Range(min=0, min_inclusive=False)
)
WEBHOOK_TIMEOUT_SECONDS = env.float("WEBHOOK_TIMEOUT_SECONDS", 10, validate=Range(min=0, min_inclusive=False))
# Deliveries are retried with exponential backoff and jitter for this long (at least once, same webhook-id).
WEBHOOK_RETRY_WINDOW_SECONDS = env.int("WEBHOOK_RETRY_WINDOW_SECONDS", 24 * 3600, validate=POSITIVE)
WEBHOOK_BACKOFF_BASE_SECONDS = env.float("WEBHOOK_BACKOFF_BASE_SECONDS", 10, validate=NOT_NEGATIVE)
WEBHOOK_BACKOFF_CAP_SECONDS = env.float("WEBHOOK_BACKOFF_CAP_SECONDS", 2 * 3600, validate=NOT_NEGATIVE)
WEBHOOK_SWEEP_INTERVAL_SECONDS = env.float(
    "WEBHOOK_SWEEP_INTERVAL_SECONDS", 30, validate=Range(min=0, min_inclusive=False)
)
WEBHOOK_MAX_BODY_BYTES = 256 * 1024
WEBHOOK_MAX_RESPONSE_BYTES = 64 * 1024
# Test sends and redeliveries POST to a URL a member chose and show the answer: limited per user and endpoint.
WEBHOOK_TEST_SENDS_PER_USER_PER_MINUTE = env.int("WEBHOOK_TEST_SENDS_PER_USER_PER_MINUTE", 10, validate=POSITIVE)
# Test sends and redeliveries: a person's over all endpoints, a person's at one endpoint, and an endpoint's over
# everyone (so one member cannot use up what an admin needs to test it). Only sends made are counted.
WEBHOOK_TEST_SENDS_PER_USER_ENDPOINT_PER_MINUTE = env.int(
    "WEBHOOK_TEST_SENDS_PER_USER_ENDPOINT_PER_MINUTE", 5, validate=POSITIVE
)
WEBHOOK_TEST_SENDS_PER_ENDPOINT_PER_MINUTE = env.int(
    "WEBHOOK_TEST_SENDS_PER_ENDPOINT_PER_MINUTE", 20, validate=POSITIVE
)
# Pending deliveries an endpoint may have; beyond it the oldest are given up (notifications/backlog.py).
WEBHOOK_MAX_PENDING_PER_ENDPOINT = env.int("WEBHOOK_MAX_PENDING_PER_ENDPOINT", 100, validate=POSITIVE)
# Links in e-mails point here.
SITE_URL = env.str("SITE_URL", "http://127.0.0.1:8000")
EMAIL_BACKEND = env.str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend" if PRODUCTION else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_HOST = env.str("EMAIL_HOST", "localhost")
EMAIL_PORT = env.int("EMAIL_PORT", 25, validate=Range(min=1, max=65535))
EMAIL_HOST_USER = env.str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env.str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", "Lium clusters <noreply@localhost>")
CELERY_BEAT_SCHEDULE["notifications-sweep"] = {
    "task": "notifications.tasks.deliveries_sweep",
    "schedule": WEBHOOK_SWEEP_INTERVAL_SECONDS,
}
CELERY_BEAT_SCHEDULE["notifications-removal-soon"] = {"task": "notifications.tasks.removal_soon_scan", "schedule": 60.0}

# --- Money (billing): budgets, balance runway, invitations ------------------------------------------------
# How often beat checks the budgets (thresholds at 80, 90, 100 % and enforcement) and reads each balance.
BUDGET_SCAN_INTERVAL_SECONDS = env.float("BUDGET_SCAN_INTERVAL_SECONDS", 300, validate=Range(min=1))
RUNWAY_CHECK_INTERVAL_SECONDS = env.float("RUNWAY_CHECK_INTERVAL_SECONDS", 600, validate=Range(min=1))
# Operators are alerted once when a credential's balance lasts fewer hours than this (again after it recovered).
RUNWAY_ALERT_HOURS = env.float("RUNWAY_ALERT_HOURS", 24, validate=Range(min=0, min_inclusive=False))
# The operators' webhook for runway alerts (Standard Webhooks, signed with the whsec_ secret); empty: e-mail only.
OPERATOR_WEBHOOK_URL = env.str("OPERATOR_WEBHOOK_URL", "")
OPERATOR_WEBHOOK_SECRET = env.str("OPERATOR_WEBHOOK_SECRET", "")
# An invitation link works once, for this long.
INVITATION_VALID_HOURS = env.int("INVITATION_VALID_HOURS", 72, validate=POSITIVE)
CELERY_BEAT_SCHEDULE["billing-budgets"] = {
    "task": "billing.tasks.budgets_scan",
    "schedule": BUDGET_SCAN_INTERVAL_SECONDS,
}
CELERY_BEAT_SCHEDULE["billing-runway"] = {
    "task": "billing.tasks.runway_check",
    "schedule": RUNWAY_CHECK_INTERVAL_SECONDS,
}
# Lium's statement of the previous STATEMENT_CHECK_DAYS UTC days against our cost per pod and day, daily at 00:20 UTC
# (a day's last 5-minute debit has landed by then; the day before is read again for late ledger rows).
STATEMENT_CHECK_DAYS = env.int("STATEMENT_CHECK_DAYS", 2, validate=Range(min=1, max=31))
CELERY_BEAT_SCHEDULE["billing-statement"] = {
    "task": "billing.tasks.statement_check",
    "schedule": crontab(hour=0, minute=20),
}

# --- Capacity watches (presets) -------------------------------------------------------------------------
# One beat task checks every active watch against the cached offers this often (one listing per credential).
CAPACITY_WATCH_SCAN_SECONDS = env.float("CAPACITY_WATCH_SCAN_SECONDS", 30, validate=Range(min=1))
# A watch ends after this many hours unless it fired (the default when none is asked for, and the most allowed).
CAPACITY_WATCH_DEFAULT_HOURS = env.int("CAPACITY_WATCH_DEFAULT_HOURS", 24, validate=POSITIVE)
CAPACITY_WATCH_MAX_HOURS = env.int("CAPACITY_WATCH_MAX_HOURS", 7 * 24, validate=POSITIVE)
if CAPACITY_WATCH_DEFAULT_HOURS > CAPACITY_WATCH_MAX_HOURS:
    raise ImproperlyConfigured(
        f"CAPACITY_WATCH_DEFAULT_HOURS ({CAPACITY_WATCH_DEFAULT_HOURS}) must not exceed CAPACITY_WATCH_MAX_HOURS "
        f"({CAPACITY_WATCH_MAX_HOURS})."
    )
CELERY_TASK_ROUTES["presets.tasks.watches_scan"] = {"queue": HOUSEKEEPING_QUEUE}
CELERY_TASK_ROUTES["presets.tasks.watch_demand_signal"] = {"queue": HOUSEKEEPING_QUEUE}
CELERY_BEAT_SCHEDULE["capacity-watches"] = {
    "task": "presets.tasks.watches_scan",
    "schedule": CAPACITY_WATCH_SCAN_SECONDS,
}
