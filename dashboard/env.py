"""The environment, read once: the `env` reader, its validators, the run folder and whether this is production.

Both settings modules (`dashboard.settings` and `dashboard.settings_apps`) read their variables through this `env`,
so `env.dump()` lists every variable the settings read.
"""

import contextlib
from pathlib import Path

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
    """Read a comma-separated variable, ignoring blanks around and between the items.

    The default is a string in the same form (environs would take a string default as a list of characters).
    """
    return [item.strip() for item in env.list(name, default.split(",")) if item.strip()]


def required_in_production(name: str, development_default: str) -> str:
    """Return the variable; in production refuse to start without it, naming it."""
    value = env.str(name, "")
    if value:
        return value
    if PRODUCTION:
        raise ImproperlyConfigured(f"{name} must be set when DASHBOARD_ENV=production.")
    return development_default
