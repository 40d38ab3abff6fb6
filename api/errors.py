"""One error envelope for the whole API, the same as the upstream's (upstream-api.md §11):

    {"success": false, "error": {"code", "message", "hint", "request_id"}, "message": ..., "status_code": N}

Every response carries `X-Request-Id` (`request_id_middleware`). Ninja's own errors (validation, 404, auth) and
any exception in a view are turned into the envelope by the exception handlers below, registered on the API with
ninja's `add_exception_handler`, so no input reaches the client as an HTML page or a bare 500.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from ninja.errors import AuthenticationError, HttpError, ValidationError

from common.db_outage import RETRY_AFTER_SECONDS, database_lost

logger = logging.getLogger(__name__)

DEFAULT_CODES = {
    400: "bad_request",
    401: "not_authenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
    500: "internal_error",
    502: "upstream_error",
    503: "upstream_unavailable",
}


class ApiError(Exception):
    """An error answer: raise it anywhere in the API and the client gets the envelope."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        hint: str = "",
        validation_errors: list[dict[str, str]] | None = None,
        headers: dict[str, str] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.hint = hint
        self.validation_errors = validation_errors
        self.headers = headers or {}
        self.details = details or {}  # more about the error, beside code and message (a quota and its usage)


def request_id(request: HttpRequest) -> str:
    rid = getattr(request, "api_request_id", None)
    if rid is None:
        rid = f"req_{uuid.uuid4().hex}"
        request.api_request_id = rid  # type: ignore[attr-defined]
    return rid


def envelope(request: HttpRequest, error: ApiError) -> dict[str, Any]:
    body: dict[str, Any] = {
        "success": False,
        "error": {
            "code": error.code,
            "message": error.message,
            "hint": error.hint,
            "request_id": request_id(request),
            **error.details,
        },
        "message": error.message,
        "status_code": error.status,
    }
    if error.validation_errors is not None:
        body["validation_errors"] = error.validation_errors
    return body


def error_response(request: HttpRequest, error: ApiError) -> JsonResponse:
    response = JsonResponse(envelope(request, error), status=error.status)
    for name, value in error.headers.items():
        response[name] = value
    response["X-Request-Id"] = request_id(request)
    return response


def _field(loc: Any) -> str:
    parts = [str(part) for part in (loc or []) if part not in ("body", "query", "path", "header", "payload")]
    return ".".join(parts) or "request"


def validation_error_from(errors: Sequence[Mapping[str, Any]]) -> ApiError:
    """Turn pydantic/ninja error dicts into a 422 with a `{field, message}` list and a readable message."""
    items = [{"field": _field(err.get("loc")), "message": str(err.get("msg", "is not valid"))} for err in errors]
    summary = "; ".join(f"{item['field']}: {item['message']}" for item in items[:5]) or "The request is not valid."
    return ApiError(
        422,
        "validation_error",
        summary,
        hint="Fix the fields listed in validation_errors and send the request again.",
        validation_errors=items,
    )


def install_handlers(api: Any) -> None:
    """Replace ninja's default exception handlers with envelope-producing ones."""

    def on_api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
        return error_response(request, exc)

    def on_validation(request: HttpRequest, exc: ValidationError) -> HttpResponse:
        return error_response(request, validation_error_from(exc.errors))

    def on_auth(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
        return error_response(
            request,
            ApiError(
                401,
                "not_authenticated",
                "An API key is required.",
                hint="Send your key as 'X-API-Key: lcd_…' or 'Authorization: Bearer lcd_…'; "
                "create one at /profile/api-keys/.",
            ),
        )

    def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
        status = exc.status_code
        return error_response(request, ApiError(status, DEFAULT_CODES.get(status, "error"), str(exc)))

    def on_404(request: HttpRequest, exc: Exception) -> HttpResponse:
        return error_response(request, ApiError(404, "not_found", str(exc) or "Not found."))

    def on_exception(request: HttpRequest, exc: Exception) -> HttpResponse:
        if database_lost(exc):  # PostgreSQL restarting: worth trying again in seconds, not a defect
            return error_response(request, _database_unavailable())
        logger.exception("Unexpected error in the JSON API (request %s)", request_id(request))
        return error_response(request, _internal())

    def on_too_big(request: HttpRequest, exc: Exception) -> HttpResponse:
        return error_response(
            request, ApiError(413, "payload_too_large", "The request body is too large.", hint="Send a smaller body.")
        )

    def on_suspicious(request: HttpRequest, exc: Exception) -> HttpResponse:
        return error_response(request, ApiError(400, "bad_request", "The request could not be read."))

    api.add_exception_handler(Exception, on_exception)
    api.add_exception_handler(RequestDataTooBig, on_too_big)
    api.add_exception_handler(SuspiciousOperation, on_suspicious)
    api.add_exception_handler(Http404, on_404)
    api.add_exception_handler(HttpError, on_http_error)
    api.add_exception_handler(AuthenticationError, on_auth)
    api.add_exception_handler(ValidationError, on_validation)
    api.add_exception_handler(ApiError, on_api_error)


def _database_unavailable() -> ApiError:
    return ApiError(
        503,
        "database_unavailable",
        "The dashboard cannot reach its database right now.",
        hint=f"Try again in {RETRY_AFTER_SECONDS} seconds; check whether a write went through before repeating it.",
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


def _internal() -> ApiError:
    return ApiError(
        500,
        "internal_error",
        "Something went wrong on our side.",
        hint="Try again; if it keeps happening, give support the request_id.",
    )


def request_id_middleware(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """Give every JSON API response its `X-Request-Id`, and the envelope to the one error no handler sees:
    ninja's 405 for a method a path does not offer."""

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        if getattr(request.resolver_match, "namespace", "") != "api-v1":
            return response
        if isinstance(response, HttpResponseNotAllowed):
            message = f"Method {request.method} is not allowed here."
            refusal = ApiError(405, "method_not_allowed", message, headers={"Allow": response["Allow"]})
            response = error_response(request, refusal)
        response["X-Request-Id"] = request_id(request)
        return response

    return middleware


def not_found_view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    """Any URL under /api/v1/ that no endpoint matches."""
    return error_response(
        request,
        ApiError(404, "not_found", "No such endpoint.", hint="See /api/v1/docs for the endpoints."),
    )
