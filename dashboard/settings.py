"""Settings for the cluster rentals dashboard.

Everything comes from the environment. With nothing set, the dashboard runs on its embedded default:
SQLite and a file-system Kombu broker under the run folder, and the local Lium simulator as the upstream.
`DATABASE_URL`, `CELERY_BROKER_URL`, `LIUM_BASE_URL`, `FIELD_ENCRYPTION_KEYS` and `SECRET_KEY` switch it to
the real stack; `DASHBOARD_ENV=production` makes the secrets mandatory.
"""

import base64
import contextlib
import hashlib
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from environs import Env
from marshmallow.validate import OneOf, Range

# Every variable is read through `env`: a bad value stops the start with a message that names the variable and
# what it expects (`Environment variable "RENT_MAX_ATTEMPTS" invalid: Not a valid integer.`). `env.dump()`
# lists what was read; a test checks the README's configuration table against it.
env = Env()
POSITIVE = Range(min=1)
NOT_NEGATIVE = Range(min=0)

BASE_DIR = Path(__file__).resolve().parent.parent
RUN_DIR = env.path("RUN_DIR", BASE_DIR / ".run")
# The embedded database, broker folders and beat schedule live here; make it on first use. (A production
# container may not be allowed to write there, and does not need to: its state is in PostgreSQL and Redis.)
with contextlib.suppress(OSError):
    RUN_DIR.mkdir(parents=True, exist_ok=True)

DASHBOARD_ENV = env.str("DASHBOARD_ENV", "development", validate=OneOf(["development", "production"]))
PRODUCTION = DASHBOARD_ENV == "production"


def env_list(name: str, default: str = "") -> list[str]:
    """Read a comma-separated variable, ignoring blanks around and between the items."""
    return [item.strip() for item in env.list(name, default) if item.strip()]


def required_in_production(name: str, development_default: str) -> str:
    """Return the variable; in production refuse to start without it, naming it."""
    value = env.str(name, "")
    if value:
        return value
    if PRODUCTION:
        raise ImproperlyConfigured(f"{name} must be set when DASHBOARD_ENV=production.")
    return development_default


SECRET_KEY = required_in_production("SECRET_KEY", "dev-only-insecure-secret-key-change-me-0123456789abcdef")
DEBUG = env.bool("DEBUG", not PRODUCTION)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "" if PRODUCTION else "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "dashboard.apps.DashboardConfig",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "axes",
    "accounts",
    "rentals",
    "ops",
    "ninja",
    "api",
    "notifications",
    "billing",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes requires: it turns a locked-out login into a clear "too many attempts" page.
    "axes.middleware.AxesMiddleware",
]

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Throttle password guessing: 5 failures for one username from one address lock it for 15 minutes.
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", 5, validate=POSITIVE)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("AXES_COOLOFF_MINUTES", 15, validate=POSITIVE))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# Proxies in front of the app (each appends to X-Forwarded-For): the login and API-key throttles count
# failures per real client address (`common.client_address`), not per proxy.
TRUSTED_PROXY_COUNT = env.int("TRUSTED_PROXY_COUNT", 0, validate=NOT_NEGATIVE)
AXES_CLIENT_IP_CALLABLE = "common.client_address.client_ip"

ROOT_URLCONF = "dashboard.urls"
WSGI_APPLICATION = "dashboard.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accounts.context_processors.roles",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env.str("DATABASE_URL", f"sqlite:///{RUN_DIR / 'db.sqlite3'}"),
        conn_max_age=env.int("DB_CONN_MAX_AGE", 60, validate=NOT_NEGATIVE),
    )
}
# PostgreSQL: a connection pool per process (psycopg-pool, Django 5.2). A rent worker runs hundreds of threads;
# with a connection each they would pass max_connections, with the pool a process holds at most this many
# (0 turns the pool off, and DB_CONN_MAX_AGE applies instead). A pooled connection goes back at close.
DB_POOL_MAX_SIZE = env.int("DB_POOL_MAX_SIZE", 8, validate=NOT_NEGATIVE)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and DB_POOL_MAX_SIZE:
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # Django refuses persistent connections with a pool
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": DB_POOL_MAX_SIZE,
        "timeout": 30,  # seconds a thread waits for a free connection before the task fails (and is redone)
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The web server and the worker write to one file: wait for a lock instead of failing, keep readers
    # off the writer's back (WAL), and take the write lock at BEGIN so two writers never deadlock.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # Django's backend, but a process's threads take turns for the write lock instead of polling for it.
    DATABASES["default"]["ENGINE"] = "common.db.sqlite3"
    # A file, not memory: end-to-end tests run a real worker process that must open the same database.
    DATABASES["default"]["TEST"] = {"NAME": str(RUN_DIR / "test-db.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if PRODUCTION
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}

CACHE_URL = env.str("CACHE_URL", "")
CACHES = {
    "default": (
        {"BACKEND": "common.redis_cache.ReusingRedisCache", "LOCATION": CACHE_URL}
        if CACHE_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    ),
    # Rendered progress sections, keyed by rental version: what is stored for a version never changes, so a
    # per-process memory cache is safe and costs no network round trip (about 5 KB an entry).
    "fragments": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "fragments",
        "TIMEOUT": 600,
        "OPTIONS": {"MAX_ENTRIES": 2000},
    },
}

# With a shared cache (Redis), sessions are read from it and written through to the database: the many
# polls of open rental pages then cost no session query. A per-process memory cache would let one process
# keep a session that another logged out, so without CACHE_URL sessions stay in the database only.
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db" if CACHE_URL else "django.contrib.sessions.backends.db"

# With a shared cache, unchanged polls read the rental's version from it instead of the database (every
# version bump drops the entry). A per-process cache cannot see another process's writes: off without one.
POLL_STATE_CACHE = bool(CACHE_URL)

# --- Upstream secrets at rest -------------------------------------------------------------------------
# Comma-separated Fernet keys, newest first: MultiFernet encrypts with the first and decrypts with any,
# so a key is rotated by prepending a new one and running `manage.py rotate_credentials`.
_dev_fernet_key = base64.urlsafe_b64encode(hashlib.sha256(f"fernet:{SECRET_KEY}".encode()).digest()).decode()
FIELD_ENCRYPTION_KEYS = env_list("FIELD_ENCRYPTION_KEYS") or (
    [required_in_production("FIELD_ENCRYPTION_KEYS", _dev_fernet_key)]
)

# --- Upstream (Lium) ----------------------------------------------------------------------------------
LIUM_BASE_URL = env.str("LIUM_BASE_URL", "http://127.0.0.1:8100/api")
LIUM_TIMEOUT_SECONDS = env.float("LIUM_TIMEOUT_SECONDS", 30, validate=Range(min=0, min_inclusive=False))
LIUM_CONNECT_TIMEOUT_SECONDS = env.float("LIUM_CONNECT_TIMEOUT_SECONDS", 5, validate=Range(min=0, min_inclusive=False))
# How long the fabric listing is reused before the upstream is asked again.
LIUM_OFFERS_CACHE_SECONDS = env.int("LIUM_OFFERS_CACHE_SECONDS", 15, validate=NOT_NEGATIVE)

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
SWEEP_INTERVAL_SECONDS = env.float("SWEEP_INTERVAL_SECONDS", 5, validate=Range(min=0, min_inclusive=False))
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

# Rent calls in flight (rentals in `sending` with a valid lease), counted in the database so the caps hold
# across worker processes and machines (`rentals.capacity`). Lium publishes no rent-rate limit; the defaults
# let a burst of 200 rentals go out at once with the shipped rent worker (RENT_WORKER_CONCURRENCY, 256).
RENT_INFLIGHT_PER_CREDENTIAL = env.int("RENT_INFLIGHT_PER_CREDENTIAL", 256, validate=POSITIVE)
RENT_INFLIGHT_GLOBAL = env.int("RENT_INFLIGHT_GLOBAL", 512, validate=POSITIVE)

# --- Celery -------------------------------------------------------------------------------------------
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
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
# Three queues, each with its own workers (Procfile, docker-compose.yml): a flood of rent calls never delays
# pod tracking or the sweeper. Routed by task name, so `send_task` (rentals.enqueue) is routed too. Anything
# unnamed goes to housekeeping, whose worker also drains `celery`, the queue of releases before the split.
RENT_QUEUE, TRACKING_QUEUE, HOUSEKEEPING_QUEUE = "rent", "tracking", "housekeeping"
CELERY_TASK_DEFAULT_QUEUE = HOUSEKEEPING_QUEUE
CELERY_TASK_ROUTES = {
    "rentals.tasks.rental_send": {"queue": RENT_QUEUE},
    "rentals.tasks.credential_pods_sync": {"queue": TRACKING_QUEUE},
    "rentals.tasks.rentals_sweep": {"queue": HOUSEKEEPING_QUEUE},
    "rentals.tasks.rental_delete_cluster": {"queue": HOUSEKEEPING_QUEUE},
    "rentals.tasks.rental_reconcile_look": {"queue": HOUSEKEEPING_QUEUE},
    "rentals.tasks.rental_schedule_removal": {"queue": HOUSEKEEPING_QUEUE},
    "rentals.tasks.sqlite_analyze": {"queue": HOUSEKEEPING_QUEUE},
    "notifications.tasks.delivery_send": {"queue": HOUSEKEEPING_QUEUE},
    "notifications.tasks.deliveries_sweep": {"queue": HOUSEKEEPING_QUEUE},
    "notifications.tasks.removal_soon_scan": {"queue": HOUSEKEEPING_QUEUE},
}
CELERY_RESULT_BACKEND = None
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(RUN_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE = {
    "sweep-rentals": {"task": "rentals.tasks.rentals_sweep", "schedule": SWEEP_INTERVAL_SECONDS},
    # SQLite keeps no planner statistics by itself (a no-op on PostgreSQL); see rentals.tasks.sqlite_analyze.
    "sqlite-analyze": {"task": "rentals.tasks.sqlite_analyze", "schedule": 3600.0},
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

# --- Content-Security-Policy (django-csp) ---------------------------------------------------------------
# Scripts and styles come only from our own static files (htmx from django-htmx's); no inline code.
# htmx's own indicator <style> is switched off in base.html (htmx-config) so style-src needs no exception.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
        "base-uri": ["'self'"],
        "object-src": ["'none'"],
    }
}

# --- Operations ---------------------------------------------------------------------------------------
# With a token set, /metrics answers only `Authorization: Bearer <token>`; production without one answers 404.
METRICS_TOKEN = env.str("METRICS_TOKEN", "")
# /readyz reuses its broker check this long: frequent probes open one broker connection per interval.
READYZ_BROKER_CHECK_SECONDS = env.float("READYZ_BROKER_CHECK_SECONDS", 5, validate=NOT_NEGATIVE)
# Per-user limits (fixed one-minute windows in the cache; use a shared CACHE_URL with several web processes).
RENT_SUBMIT_RATE_PER_MINUTE = env.int("RENT_SUBMIT_RATE_PER_MINUTE", 20, validate=POSITIVE)
API_RATE_PER_MINUTE = env.int("API_RATE_PER_MINUTE", 120, validate=NOT_NEGATIVE)  # 0: no limit
# Bad API keys from one client address: after this many in the window, further bad keys get 429 (valid keys
# are always checked first and served).
API_AUTH_FAILURE_LIMIT = env.int("API_AUTH_FAILURE_LIMIT", 10, validate=POSITIVE)
API_AUTH_FAILURE_WINDOW_SECONDS = env.int("API_AUTH_FAILURE_WINDOW_SECONDS", 60, validate=POSITIVE)
# Request bodies: a rent form is a few kilobytes; refuse anything absurd before parsing it.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("DATA_UPLOAD_MAX_MEMORY_SIZE", 256 * 1024, validate=POSITIVE)
DATA_UPLOAD_MAX_NUMBER_FIELDS = 2000

# --- Demo data ----------------------------------------------------------------------------------------
DEMO_PASSWORD = env.str("DEMO_PASSWORD", "demo")
SIMULATOR_API_KEY = env.str("LIUM_SIM_API_KEY", "sim-demo-key")

# --- Logging ------------------------------------------------------------------------------------------
# JSON lines in production (one object per line, with the bound rental/user context), plain text locally.
LOG_FORMAT = env.str("LOG_FORMAT", "json" if PRODUCTION else "plain", validate=OneOf(["json", "plain"]))
LOG_LEVEL = env.str("LOG_LEVEL", "INFO", validate=OneOf(["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "common.logcontext.ContextFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["context"]},
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # httpx and httpcore log request lines and, at DEBUG, headers: keep them quiet so an upstream
        # key can never reach a log through them.
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
    },
}

# Read in every environment (so a typo fails in development too), used in production only.
_hsts_seconds = env.int("SECURE_HSTS_SECONDS", 365 * 24 * 3600, validate=NOT_NEGATIVE)
_ssl_redirect = env.bool("SECURE_SSL_REDIRECT", True)
_trust_forwarded_proto = env.bool("TRUST_X_FORWARDED_PROTO", False)
if PRODUCTION:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = _hsts_seconds
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_SSL_REDIRECT = _ssl_redirect
    # Probes from a load balancer often speak plain HTTP inside the network.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
    SECURE_CONTENT_TYPE_NOSNIFF = True
    if _trust_forwarded_proto:
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
