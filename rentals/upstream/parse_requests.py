"""Read the answer to `POST /machine-requests`, Lium's demand signal (upstream-api.md §17).

The answer holds `provider_notified_count` and an optional `confirmation`; like every answer it is checked here,
and a body that is not an object is `Unparseable`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rentals.upstream.parse import count, json_object, text


@dataclass(frozen=True)
class MachineRequestAnswer:
    provider_notified_count: int | None
    confirmation: str


def machine_request_answer(body: Any) -> MachineRequestAnswer:
    row = json_object(body, "The machine request's answer")
    return MachineRequestAnswer(
        provider_notified_count=count(row.get("provider_notified_count")),
        confirmation=text(row.get("confirmation"), 200),
    )
