"""The reboot lifecycle on the sim clock (the routes are in routes_repair.py): REBOOT_PENDING, then RUNNING or
REBOOT_FAILED once ``reboot_until`` has passed. Apart from the routes so that State.refresh can call it."""

from __future__ import annotations

from typing import Any


def advance_reboot(state: Any, pod: dict[str, Any], now: float) -> None:
    """Finish a due reboot (called by State.refresh)."""
    if pod["status"] != "REBOOT_PENDING" or now < pod["reboot_until"]:
        return
    pod["updated_at"] = pod["reboot_until"]
    if pod.get("reboot_fails"):
        pod["status"] = "REBOOT_FAILED"
        state.add_event(pod, "reboot_failed", pod["reboot_fails"], pod["reboot_until"])
    else:
        pod["status"] = "RUNNING"
        state.add_event(pod, "running", "Pod is running after reboot", pod["reboot_until"])
