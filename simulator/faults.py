"""Fault rules: which calls misbehave, and how, from a seeded RNG or a countdown."""

from __future__ import annotations

import copy
import random
import re
import threading
from collections.abc import Callable
from typing import Any

# Every fault the simulator knows, with the route it targets when a rule names none.
KNOWN_FAULTS = {
    "latency": "rent",
    "error_before_commit": "rent",
    "error_after_commit": "rent",
    "drop_before_commit": "rent",
    "drop_after_commit": "rent",
    "slow_commit": "rent",
    "outcome_unknown": "rent",
    "rate_limit": "rent",
    "pods_rate_limit": "pods",
    "member_start_failure": "rent",
    "member_delete_failure": "delete",
    "reboot_failure": "reboot",
    "reset_gpu_failure": "reset-gpu",
    # Misbehaviour of a sloppy gateway or backend (our simulator's choice, not upstream fact).
    "html_2xx": "rent",
    "empty_2xx": "rent",
    "no_pod_ids": "rent",
    "long_ids": "rent",
    "pods_malformed": "pods",
    "pods_empty": "pods",
    "set_cookie": "*",
    "trickle": "rent",
    "delete_outage": "delete",
}

ROUTES = {
    "*",
    "rent",
    "pods",
    "offers",
    "templates",
    "version",
    "ssh-keys",
    "delete",
    "schedule-removal",
    "events",
    "users",
    "estimate",
    "machine-requests",
    "user-events",
    "shared-config",
    "reboot",
    "reset-gpu",
    "statement",
}


PODS_SHAPES = ("object", "html", "junk_rows")
COOKIE_NAME_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")  # an RFC 6265 token


class FaultConfigError(ValueError):
    """Report an invalid fault rule set."""


# An option check returns None when the value is fine, else what the value must be.
OptionCheck = Callable[[Any], str | None]


def _boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else "must be true or false"


def _status(low: int, high: int, kind: str) -> OptionCheck:
    def check(value: Any) -> str | None:
        ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
        return None if ok else f"must be a {kind} status code ({low}-{high})"

    return check


def _positive(limit: float) -> OptionCheck:
    def check(value: Any) -> str | None:
        if not isinstance(value, int | float) or isinstance(value, bool):
            return "must be a number of seconds"
        return None if 0 < value <= limit else f"must be > 0 and at most {limit:g} seconds"

    return check


def _shape(value: Any) -> str | None:
    return None if value in PODS_SHAPES else f"must be one of {', '.join(PODS_SHAPES)}; got {value!r}"


def _cookie_name(value: Any) -> str | None:
    ok = isinstance(value, str) and COOKIE_NAME_RE.match(value)
    return None if ok else "must be a cookie name (1-64 token characters, no spaces, ';' or '=')"


# The options each misbehaviour rule accepts; anything else is refused, so a typo is not silently ignored.
MISBEHAVIOUR_OPTIONS: dict[str, dict[str, OptionCheck]] = {
    "html_2xx": {"commit": _boolean, "status": _status(200, 299, "2xx")},
    "empty_2xx": {"commit": _boolean, "status": _status(200, 299, "2xx")},
    "no_pod_ids": {},
    "long_ids": {},
    "pods_malformed": {"shape": _shape},
    "pods_empty": {},
    "set_cookie": {"name": _cookie_name},
    "trickle": {"commit": _boolean, "interval": _positive(60), "seconds": _positive(3600)},
    "delete_outage": {"status": _status(500, 599, "5xx"), "drop": _boolean},
}
# Where a misbehaviour can happen at all; "*" always means "wherever it applies".
MISBEHAVIOUR_ROUTES: dict[str, set[str]] = {
    "html_2xx": {"rent"},
    "empty_2xx": {"rent"},
    "no_pod_ids": {"rent"},
    "long_ids": {"rent", "pods"},
    "pods_malformed": {"pods"},
    "pods_empty": {"pods"},
    "delete_outage": {"delete"},
}
RULE_KEYS = {"fault", "route", "next", "probability", "remaining"}


def _check_misbehaviour(name: str, rule: dict[str, Any]) -> None:
    """Refuse unknown options, bad option values and routes where the fault cannot happen."""
    options = MISBEHAVIOUR_OPTIONS[name]
    allowed = MISBEHAVIOUR_ROUTES.get(name)
    if allowed is not None and rule["route"] not in allowed | {"*"}:
        where = " or ".join(repr(r) for r in sorted(allowed))
        raise FaultConfigError(f"{name} applies to route {where} only, not {rule['route']!r}")
    for option, value in rule.items():
        if option in RULE_KEYS:
            continue
        check = options.get(option)
        if check is None:
            known = ", ".join(sorted(options)) or "none"
            raise FaultConfigError(f"{name}: unknown option {option!r}; its options: {known}")
        problem = check(value)
        if problem:
            raise FaultConfigError(f"{name}: {option!r} {problem}")
    if name == "trickle" and rule.get("interval", 1.0) > rule.get("seconds", 120):
        raise FaultConfigError("trickle: 'interval' must not exceed 'seconds'")


def _validate_rule(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise FaultConfigError("each rule must be an object")
    name = raw.get("fault")
    if name not in KNOWN_FAULTS:
        raise FaultConfigError(f"unknown fault {name!r}; known: {sorted(KNOWN_FAULTS)}")
    rule = dict(raw)
    rule.setdefault("route", KNOWN_FAULTS[name])
    if rule["route"] not in ROUTES:
        raise FaultConfigError(f"unknown route {rule['route']!r}; known: {sorted(ROUTES)}")
    if name in MISBEHAVIOUR_OPTIONS:
        _check_misbehaviour(name, rule)
    if "next" in rule:
        if not isinstance(rule["next"], int) or isinstance(rule["next"], bool) or rule["next"] < 0:
            raise FaultConfigError("'next' must be a non-negative integer")
        rule["remaining"] = rule["next"]
    elif "probability" in rule:
        p = rule["probability"]
        if not isinstance(p, int | float) or isinstance(p, bool) or not 0 <= p <= 1:
            raise FaultConfigError("'probability' must be a number in [0, 1]")
    return rule


class FaultEngine:
    """Hold the rule set and decide, reproducibly, whether a fault fires."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seed: int = 0
        self._rng = random.Random(0)  # noqa: S311 - reproducible chaos, not crypto
        self._rules: list[dict[str, Any]] = []

    def configure(self, spec: Any) -> None:
        """Replace the rule set with ``{"seed": n, "rules": [...]}``."""
        if spec is None:
            spec = {}
        if isinstance(spec, list):
            spec = {"rules": spec}
        if not isinstance(spec, dict):
            raise FaultConfigError("faults must be an object like {'seed': 1, 'rules': [...]}")
        raw_rules = spec.get("rules", [])
        if not isinstance(raw_rules, list):
            raise FaultConfigError("'rules' must be a list")
        rules = [_validate_rule(r) for r in raw_rules]
        seed = spec.get("seed", 0)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise FaultConfigError("'seed' must be an integer")
        with self._lock:
            self._seed = seed
            self._rng = random.Random(seed)  # noqa: S311
            self._rules = rules

    def clear(self) -> None:
        """Drop every rule."""
        self.configure({})

    def describe(self) -> dict[str, Any]:
        """Return the rule set with the countdowns left."""
        with self._lock:
            return {"seed": self._seed, "rules": copy.deepcopy(self._rules)}

    def has(self, fault: str, route: str) -> dict[str, Any] | None:
        """Return a matching rule without consuming it (for standing settings)."""
        with self._lock:
            for rule in self._rules:
                if rule["fault"] == fault and rule["route"] in (route, "*"):
                    return dict(rule)
        return None

    def take(self, fault: str, route: str) -> dict[str, Any] | None:
        """Return the first matching rule that fires now, consuming a countdown step."""
        with self._lock:
            for rule in self._rules:
                if rule["fault"] != fault or rule["route"] not in (route, "*"):
                    continue
                if "remaining" in rule:
                    if rule["remaining"] <= 0:
                        continue
                    rule["remaining"] -= 1
                    return dict(rule)
                if "probability" in rule:
                    if self._rng.random() < rule["probability"]:
                        return dict(rule)
                    continue
                return dict(rule)  # neither next nor probability: always fires
        return None

    def chance(self, p: float) -> bool:
        """Draw from the seeded RNG (for a rule's own probabilistic parameter)."""
        with self._lock:
            return self._rng.random() < p

    def uniform(self, lo: float, hi: float) -> float:
        """Draw a float in [lo, hi] from the seeded RNG."""
        with self._lock:
            return self._rng.uniform(lo, hi)
