"""Fault rules: which calls misbehave, and how, from a seeded RNG or a countdown."""

from __future__ import annotations

import copy
import random
import threading
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
}


class FaultConfigError(ValueError):
    """Report an invalid fault rule set."""


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
