"""Settings for the cluster rentals dashboard.

Everything comes from the environment. With nothing set, the dashboard runs on its embedded default:
SQLite and a file-system Kombu broker under the run folder, and the local Lium simulator as the upstream.
`DATABASE_URL`, `CELERY_BROKER_URL`, `LIUM_BASE_URL`, `FIELD_ENCRYPTION_KEYS` and `SECRET_KEY` switch it to
the real stack; `DASHBOARD_ENV=production` makes the secrets mandatory.
"""

import base64
import hashlib
from datetime import timedelta

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from marshmallow.validate import OneOf

from dashboard.env import (  # noqa: F401 - part of the settings
    BASE_DIR,
    DASHBOARD_ENV,
    NOT_NEGATIVE,
    POSITIVE,
    PRODUCTION,
    RUN_DIR,
    env,
    env_list,
    required_in_production,
)

SECRET_KEY = required_in_production("SECRET_KEY", "dev-only-insecure-secret-key-change-me-0123456789abcdef")
DEBUG = env.bool("DEBUG", not PRODUCTION)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "" if PRODUCTION else "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "dashboard.apps.DashboardConfig",
    "dashboard.admin_site.DashboardAdminConfig",  # django.contrib.admin, with its guard
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",  # the session list (allauth.usersessions) says "3 minutes ago"
    "django_htmx",
    "template_partials",
    "axes",
    # django-allauth: sign-in, e-mail, password reset, two-factor (TOTP + recovery codes), sessions; socialaccount
    # is there for per-customer OpenID Connect.
    "allauth",
    "allauth.account",
    "allauth.mfa",
    "allauth.socialaccount",
    "allauth.usersessions",
    "accounts",
    "rentals",
    "ops",
    "ninja",
    "api",
    "notifications",
    "billing",
    "presets",
    "sso",  # single sign-on per customer (OpenID Connect through allauth's socialaccount)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "accounts.mfa_required.MfaRequiredMiddleware",  # a user who must have two-factor enrols before anything else
    "accounts.htmx_sign_in.htmx_sign_in_middleware",  # a poll after sign-out loads the sign-in page
    "api.errors.request_id_middleware",  # the JSON API's X-Request-Id
    "common.db_outage.DatabaseOutageMiddleware",  # a lost database: 503 with Retry-After, not a 500
    # Last, as django-axes requires: it turns a locked-out login into a clear "too many attempts" page.
    "axes.middleware.AxesMiddleware",
]

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",  # invitations sign the new member in through it
    "allauth.account.auth_backends.AuthenticationBackend",  # username or e-mail
]
# Throttle password guessing: 5 failures for one username from one address lock it for 15 minutes, and 30
# failures from one address over any usernames lock that address (`common.login_lockout`).
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", 5, validate=POSITIVE)
LOGIN_ADDRESS_FAILURE_LIMIT = env.int("LOGIN_ADDRESS_FAILURE_LIMIT", 30, validate=POSITIVE)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("AXES_COOLOFF_MINUTES", 15, validate=POSITIVE))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_HANDLER = "common.login_lockout.LoginLockoutHandler"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# Proxies in front of the app (each appends to X-Forwarded-For): the login and API-key throttles count
# failures per real client address (`common.client_address`), not per proxy.
TRUSTED_PROXY_COUNT = env.int("TRUSTED_PROXY_COUNT", 0, validate=NOT_NEGATIVE)
AXES_CLIENT_IP_CALLABLE = "common.client_address.throttle_address"
AXES_USERNAME_CALLABLE = "common.client_address.login_username"

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
        # After a database restart every kept connection is dead: check one before use and drop it if so.
        conn_health_checks=True,
    )
}
# PostgreSQL: a connection pool per process (psycopg-pool, Django 5.2). A rent worker runs hundreds of threads;
# with a connection each they would pass max_connections, with the pool a process holds at most this many
# (0 turns the pool off, and DB_CONN_MAX_AGE applies instead). A pooled connection goes back at close.
DB_POOL_MAX_SIZE = env.int("DB_POOL_MAX_SIZE", 8, validate=NOT_NEGATIVE)
# Seconds a thread waits for a connection before the task fails (and is redone) or the page answers 503: the
# web process sets it short, so a request during a database outage is not held for long.
DB_POOL_TIMEOUT_SECONDS = env.int("DB_POOL_TIMEOUT_SECONDS", 30, validate=POSITIVE)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and DB_POOL_MAX_SIZE:
    from common.db_pool import pooled_connection_check

    DATABASES["default"]["CONN_MAX_AGE"] = 0  # Django refuses persistent connections with a pool
    # Django's backend, but the pool checks a connection before lending it with a round trip only when the
    # server has closed it (`common.db_pool`), not on every loan.
    DATABASES["default"]["ENGINE"] = "common.db.postgresql"
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": DB_POOL_MAX_SIZE,
        "timeout": DB_POOL_TIMEOUT_SECONDS,
        "check": pooled_connection_check,
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

# --- Accounts (django-allauth) --------------------------------------------------------------------------
# People sign in with their username or e-mail; accounts come from operators and invitations, never a public
# sign-up (`accounts.allauth_adapter`). Password reset, e-mail change and two-factor are allauth's own.
ACCOUNT_ADAPTER = "accounts.allauth_adapter.DashboardAccountAdapter"
ACCOUNT_LOGIN_METHODS = {"username", "email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "username*", "password1*", "password2*"]
ACCOUNT_EMAIL_VERIFICATION = "optional"  # a new address is confirmed before it replaces the old one
ACCOUNT_CHANGE_EMAIL = True  # one address per person: confirming a new one replaces the old
ACCOUNT_EMAIL_NOTIFICATIONS = True  # password, e-mail and two-factor changes are e-mailed to the user
ACCOUNT_EMAIL_SUBJECT_PREFIX = "[Lium clusters] "
ACCOUNT_DEFAULT_HTTP_PROTOCOL = "https" if PRODUCTION else "http"
# Password guessing stays django-axes' (above: per username+address and per address, 15 minutes), so allauth's
# own login limits are off; "login_failed" then only counts wrong two-factor codes: 5 per user per 15 minutes.
# A sensitive change (adding an authenticator, an e-mail) asks again for the password or a two-factor code, never
# a code e-mailed to the address the change may be about.
ACCOUNT_REAUTHENTICATION_METHODS = ("password", "mfa")
ACCOUNT_RATE_LIMITS = {"login": None, "login_failed": "5/15m/key"}
MFA_SUPPORTED_TYPES = ["totp", "recovery_codes"]
MFA_ADAPTER = "accounts.two_factor.DashboardMfaAdapter"  # who must have two-factor cannot switch it off
MFA_TOTP_ISSUER = env.str("MFA_TOTP_ISSUER", "Lium clusters")
# Operators and support read every customer's clusters: in production their first sign-in without TOTP sends
# them to enrol before anything else (`accounts.mfa_required`).
MFA_REQUIRED_FOR_STAFF = env.bool("MFA_REQUIRED_FOR_STAFF", PRODUCTION)
if PRODUCTION and not MFA_REQUIRED_FOR_STAFF:
    raise ImproperlyConfigured(
        "MFA_REQUIRED_FOR_STAFF cannot be off when DASHBOARD_ENV=production: operators and support read every "
        "customer's clusters and must have two-factor there."
    )
# Customers' single sign-on: each customer's provider is an allauth app built from `sso.SsoConfig` (its secret
# decrypted in memory only); where a customer made SSO mandatory the sign-in form refuses passwords and the e-mail
# form an address outside its domains.
SOCIALACCOUNT_ADAPTER = "sso.adapter.CustomerSsoAdapter"
ACCOUNT_FORMS = {"login": "sso.forms.SsoLoginForm", "add_email": "sso.forms.SsoAddEmailForm"}
USERSESSIONS_ADAPTER = "accounts.user_sessions.DashboardUserSessionsAdapter"  # audits and e-mails each sign-out
# A session is recorded at sign-in only: tracking every request would cost a write on each poll.
USERSESSIONS_TRACK_ACTIVITY = False

TIME_ZONE = "UTC"

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
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
        if CACHE_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    ),
    # Rendered progress sections, per rental version (`rentals.web.progress`, for the poll ratios): what is kept
    # for a version changes only by time, which its timeout covers, so a per-process cache is safe.
    "fragments": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "fragments"},
}

# With a shared cache (Redis), sessions are read from it and written through to the database: pages then cost
# no session query (a poll with its token checks only that the session row exists). A per-process memory cache
# would let one process keep a session that another logged out, so without CACHE_URL sessions stay in the database.
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db" if CACHE_URL else "django.contrib.sessions.backends.db"

# --- Upstream secrets at rest -------------------------------------------------------------------------
# Comma-separated Fernet keys, newest first: MultiFernet encrypts with the first and decrypts with any,
# so a key is rotated by prepending a new one and running `manage.py rotate_credentials`.
_dev_fernet_key = base64.urlsafe_b64encode(hashlib.sha256(f"fernet:{SECRET_KEY}".encode()).digest()).decode()
FIELD_ENCRYPTION_KEYS = env_list("FIELD_ENCRYPTION_KEYS") or (
    [required_in_production("FIELD_ENCRYPTION_KEYS", _dev_fernet_key)]
)

# The apps' settings (upstream, rent engine, Celery, notifications, money) live in their own module.
from dashboard.settings_apps import *  # noqa: E402, F403

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
    "filters": {
        "context": {"()": "common.logcontext.ContextFilter"},
        "invitation_tokens": {"()": "common.logredact.RedactInvitationTokens"},
    },
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["context", "invitation_tokens"],
        },
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # httpx and httpcore log request lines and, at DEBUG, headers: keep them quiet so an upstream
        # key can never reach a log through them.
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        # The dev server's request lines go through the console handler too, so its filters apply to them.
        "django.server": {"handlers": ["console"], "level": "INFO", "propagate": False},
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
    if _trust_forwarded_proto:
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
