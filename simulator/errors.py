"""The upstream error envelope and request ids."""

from __future__ import annotations

import secrets
from typing import Any


def new_request_id() -> str:
    """Return a fresh request id in the upstream's ``req_<hex>`` style."""
    return "req_" + secrets.token_hex(8)


class ApiError(Exception):
    """Refuse a request; the app turns this into the envelope."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        hint: str | None = None,
        detail: Any = None,
        data: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.hint = hint
        # The outer ``message`` keeps the route's detail, which may be a dict.
        self.detail = message if detail is None else detail
        self.data = data
        self.headers = headers or {}
        self.extra = extra or {}


def rate_limited(message: str, retry: int) -> ApiError:
    """Refuse with 429 and the seconds to wait (in `Retry-After` and the hint)."""
    return ApiError(429, "rate_limited", message, hint=f"Retry after {retry} s.", headers={"Retry-After": str(retry)})


def field_error(field: str, message: str, code: str = "validation_error", status: int = 422) -> ApiError:
    """Refuse one field, with the `validation_errors` row the upstream adds."""
    return ApiError(
        status, code, f"{field}: {message}", extra={"validation_errors": [{"field": field, "message": message}]}
    )


def envelope(err: ApiError, request_id: str) -> dict[str, Any]:
    """Build the current-server envelope for a refusal."""
    error: dict[str, Any] = {
        "code": err.code,
        "message": err.message,
        "hint": err.hint,
        "request_id": request_id,
    }
    if err.data is not None:
        error["data"] = err.data
    body: dict[str, Any] = {
        "success": False,
        "error": error,
        "message": err.detail,
        "status_code": err.status,
    }
    body.update(err.extra)
    return body
