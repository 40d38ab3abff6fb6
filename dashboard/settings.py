"""Settings for the cluster rentals dashboard.

Everything comes from the environment. With nothing set, the dashboard runs on its embedded default:
SQLite and a file-system Kombu broker under the run folder, and the local Lium simulator as the upstream.
`DATABASE_URL`, `CELERY_BROKER_URL`, `LIUM_BASE_URL`, `FIELD_ENCRYPTION_KEYS` and `SECRET_KEY` switch it to
the real stack; `DASHBOARD_ENV=production` makes the secrets mandatory.
"""

import base64
import contextlib
import hashlib
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
RUN_DIR = Path(os.environ.get("RUN_DIR", BASE_DIR / ".run"))
# The embedded database, broker folders and beat schedule live here; make it on first use. (A production
# container may not be allowed to write there, and does not need to: its state is in PostgreSQL and Redis.)
with contextlib.suppress(OSError):
    RUN_DIR.mkdir(parents=True, exist_ok=True)

DASHBOARD_ENV = os.environ.get("DASHBOARD_ENV", "development")
PRODUCTION = DASHBOARD_ENV == "production"


def env_bool(name: str, default: bool) -> bool:
    """Read a yes/no environment variable."""
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str = "") -> list[str]:
    """Read a comma-separated environment variable."""
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def required_in_production(name: str, development_default: str) -> str:
    """Return the variable; in production refuse to start without it, naming it."""
    value = os.environ.get(name)
    if value:
        return value
    if PRODUCTION:
        raise ImproperlyConfigured(f"{name} must be set when DASHBOARD_ENV=production.")
    return development_default


SECRET_KEY = required_in_production("SECRET_KEY", "dev-only-insecure-secret-key-change-me-0123456789abcdef")
DEBUG = env_bool("DEBUG", not PRODUCTION)
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
AXES_FAILURE_LIMIT = int(os.environ.get("AXES_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=int(os.environ.get("AXES_COOLOFF_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_IPWARE_PROXY_COUNT = int(os.environ.get("TRUSTED_PROXY_COUNT", "0")) or None

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
    "default": dj_database_url.config(
        default=f"sqlite:///{RUN_DIR / 'db.sqlite3'}",
        conn_max_age=int(os.environ.get("DB_CONN_MAX_AGE", "60")),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The web server and the worker write to one file: wait for a lock instead of failing, keep readers
    # off the writer's back (WAL), and take the write lock at BEGIN so two writers never deadlock.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
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

CACHES = {
    "default": (
        {"BACKEND": "dashboard.redis_cache.ReusingRedisCache", "LOCATION": os.environ["CACHE_URL"]}
        if os.environ.get("CACHE_URL")
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
SESSION_ENGINE = (
    "django.contrib.sessions.backends.cached_db"
    if os.environ.get("CACHE_URL")
    else "django.contrib.sessions.backends.db"
)

# With a shared cache, unchanged polls read the rental's version from it instead of the database (every
# version bump drops the entry). A per-process cache cannot see another process's writes: off without one.
POLL_STATE_CACHE = bool(os.environ.get("CACHE_URL"))

# --- Upstream secrets at rest -------------------------------------------------------------------------
# Comma-separated Fernet keys, newest first: MultiFernet encrypts with the first and decrypts with any,
# so a key is rotated by prepending a new one and running `manage.py rotate_credentials`.
_dev_fernet_key = base64.urlsafe_b64encode(hashlib.sha256(f"fernet:{SECRET_KEY}".encode()).digest()).decode()
FIELD_ENCRYPTION_KEYS = env_list("FIELD_ENCRYPTION_KEYS") or (
    [required_in_production("FIELD_ENCRYPTION_KEYS", _dev_fernet_key)]
)

# --- Upstream (Lium) ----------------------------------------------------------------------------------
LIUM_BASE_URL = os.environ.get("LIUM_BASE_URL", "http://127.0.0.1:8100/api")
LIUM_TIMEOUT_SECONDS = float(os.environ.get("LIUM_TIMEOUT_SECONDS", "30"))
LIUM_CONNECT_TIMEOUT_SECONDS = float(os.environ.get("LIUM_CONNECT_TIMEOUT_SECONDS", "5"))
# How long the fabric listing is reused before the upstream is asked again.
LIUM_OFFERS_CACHE_SECONDS = int(os.environ.get("LIUM_OFFERS_CACHE_SECONDS", "15"))

# --- Rent engine --------------------------------------------------------------------------------------
# Automatic retries stop inside the upstream's 24 h idempotency window; past this only a human decides.
RENT_RETRY_WINDOW = timedelta(seconds=min(int(os.environ.get("RENT_RETRY_WINDOW_SECONDS", str(2 * 3600))), 23 * 3600))
RENT_MAX_ATTEMPTS = int(os.environ.get("RENT_MAX_ATTEMPTS", "8"))
RENT_BACKOFF_BASE_SECONDS = float(os.environ.get("RENT_BACKOFF_BASE_SECONDS", "2"))
RENT_BACKOFF_CAP_SECONDS = float(os.environ.get("RENT_BACKOFF_CAP_SECONDS", "120"))
# A worker holds a rental in `sending` for at most this long; past it the sweeper lets another worker retry.
RENT_LEASE_SECONDS = int(os.environ.get("RENT_LEASE_SECONDS", str(int(LIUM_TIMEOUT_SECONDS) + 30)))
# A `queued` rental whose message has not been picked up after this long is re-enqueued by the sweeper.
RENT_QUEUED_STUCK_SECONDS = int(os.environ.get("RENT_QUEUED_STUCK_SECONDS", "30"))
# The upstream caps pod listings at about 60 a minute per account; one poller per credential stays below.
POD_POLL_MIN_INTERVAL_SECONDS = float(os.environ.get("POD_POLL_MIN_INTERVAL_SECONDS", "3"))
SWEEP_INTERVAL_SECONDS = float(os.environ.get("SWEEP_INTERVAL_SECONDS", "5"))

# --- Celery -------------------------------------------------------------------------------------------
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
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
CELERY_RESULT_BACKEND = None
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(RUN_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE = {
    "sweep-rentals": {"task": "rentals.tasks.rentals_sweep", "schedule": SWEEP_INTERVAL_SECONDS},
    # SQLite keeps no planner statistics by itself (a no-op on PostgreSQL); see rentals.tasks.sqlite_analyze.
    "sqlite-analyze": {"task": "rentals.tasks.sqlite_analyze", "schedule": 3600.0},
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
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
# /readyz reuses its broker check this long: frequent probes open one broker connection per interval.
READYZ_BROKER_CHECK_SECONDS = float(os.environ.get("READYZ_BROKER_CHECK_SECONDS", "5"))
# Per-user limits (fixed one-minute windows in the cache; use a shared CACHE_URL with several web processes).
RENT_SUBMIT_RATE_PER_MINUTE = int(os.environ.get("RENT_SUBMIT_RATE_PER_MINUTE", "20"))
API_RATE_PER_MINUTE = int(os.environ.get("API_RATE_PER_MINUTE", "120"))
# Request bodies: a rent form is a few kilobytes; refuse anything absurd before parsing it.
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("DATA_UPLOAD_MAX_MEMORY_SIZE", str(256 * 1024)))
DATA_UPLOAD_MAX_NUMBER_FIELDS = 2000

# --- Demo data ----------------------------------------------------------------------------------------
DEMO_PASSWORD = os.environ.get("DEMO_PASSWORD", "demo")
SIMULATOR_API_KEY = os.environ.get("LIUM_SIM_API_KEY", "sim-demo-key")

# --- Logging ------------------------------------------------------------------------------------------
# JSON lines in production (one object per line, with the bound rental/user context), plain text locally.
LOG_FORMAT = os.environ.get("LOG_FORMAT", "json" if PRODUCTION else "plain")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "dashboard.logcontext.ContextFilter"}},
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
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        # httpx and httpcore log request lines and, at DEBUG, headers: keep them quiet so an upstream
        # key can never reach a log through them.
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
    },
}

if PRODUCTION:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", str(365 * 24 * 3600)))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    # Probes from a load balancer often speak plain HTTP inside the network.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
    SECURE_CONTENT_TYPE_NOSNIFF = True
    if env_bool("TRUST_X_FORWARDED_PROTO", False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
