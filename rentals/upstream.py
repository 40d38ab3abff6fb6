"""The only Lium API client: one module over an injected `httpx.Client`.

Reads return parsed JSON or raise one error tree:

    UpstreamError
    ├── UpstreamUnavailable        retry later: network error, timeout, 5xx
    │   └── RateLimited            429; `retry_after` seconds when the server said
    ├── UpstreamRejected           final: the server decided (4xx)
    │   ├── AuthenticationFailed   401
    │   ├── PermissionDenied       403 (scope, balance, ownership)
    │   ├── NotFound               404
    │   └── Conflict               409 (e.g. a member still being created)
    └── UnsafeRedirect             a redirect to another origin: never followed, nothing re-sent

The rent call never raises: `rent_cluster` returns a `RentResult` whose `classification` says what the
answer proves (see `classify_rent`), because the rent engine must record every attempt, whatever happened.

Redirects are followed here, never by httpx, and only to the same scheme, host and port (at most 5 hops),
so the API key never reaches another host.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
from django.conf import settings

from accounts.models import UpstreamCredential

MAX_REDIRECTS = 5
CLIENT_HEADERS = {"X-Source": "dashboard", "User-Agent": "lium-cluster-dashboard/0.1"}


class UpstreamError(Exception):
    """Any failure talking to the Lium API."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str = "",
        hint: str = "",
        request_id: str = "",
        data: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.hint = hint
        self.request_id = request_id
        self.data = data


class UpstreamUnavailable(UpstreamError):
    """The API could not be reached or did not answer usefully; try again later."""


class RateLimited(UpstreamUnavailable):
    """The API asked us to slow down (429)."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class UpstreamRejected(UpstreamError):
    """The API refused the request; repeating it unchanged will not help."""


class AuthenticationFailed(UpstreamRejected):
    """401: the credential is wrong or revoked."""


class PermissionDenied(UpstreamRejected):
    """403: scope, balance or ownership."""


class NotFound(UpstreamRejected):
    """404: no such resource (or no such route on this server)."""


class Conflict(UpstreamRejected):
    """409: the resource is busy."""


class UnsafeRedirect(UpstreamError):
    """A redirect to another origin, a bad Location, or too many hops."""


@dataclass(frozen=True)
class Auth:
    """How a credential authenticates: `X-API-Key` or `Authorization: Bearer`."""

    scheme: str
    secret: str = field(repr=False)

    def headers(self) -> dict[str, str]:
        if self.scheme == UpstreamCredential.Scheme.BEARER:
            return {"Authorization": f"Bearer {self.secret}"}
        return {"X-API-Key": self.secret}

    def __repr__(self) -> str:  # never show the secret, even in a traceback's locals
        return f"Auth(scheme={self.scheme!r}, secret=<hidden>)"


class Classification:
    """What one rent answer proves (the values of RentAttempt.Classification)."""

    CONFIRMED = "confirmed"
    REFUSED = "refused"
    INCONCLUSIVE = "inconclusive"
    NEVER_SENT = "never_sent"
    OUTCOME_UNKNOWN = "outcome_unknown"


@dataclass(frozen=True)
class RentResult:
    """One rent attempt, classified."""

    classification: str
    http_status: int | None = None
    replayed: bool = False
    request_id: str = ""
    error_code: str = ""
    message: str = ""
    hint: str = ""
    pod_ids: list[str] = field(default_factory=list)
    cluster_id: str = ""
    retry_after: float | None = None
    # 422 idempotency_key_reused: our stored bytes changed for a key, which is a defect of ours.
    key_reused: bool = False


# --- Parsing the upstream's answers ----------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorDetail:
    code: str
    message: str
    hint: str
    request_id: str
    data: Any


def parse_error(response: httpx.Response) -> ErrorDetail:
    """Read the error envelope (current and older servers) into code, human message, hint, request id."""
    try:
        body = response.json()
    except ValueError:
        body = None
    code = hint = request_id = ""
    data: Any = None
    message = ""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            code = str(error.get("code") or "")
            hint = str(error.get("hint") or "")
            request_id = str(error.get("request_id") or "")
            data = error.get("data")
            message = str(error.get("message") or "")
        elif isinstance(error, str):
            message = error
        detail = body.get("detail", body.get("message"))
        validation = body.get("validation_errors")
        if isinstance(validation, list) and validation:
            message = "; ".join(
                f"{item.get('field')}: {item.get('message')}" if isinstance(item, dict) else str(item)
                for item in validation
            )
        elif isinstance(detail, list) and detail:
            message = "; ".join(str(item.get("msg", item)) if isinstance(item, dict) else str(item) for item in detail)
        elif isinstance(detail, dict):
            message = str(detail.get("message") or message)
            data = data if data is not None else detail
        elif isinstance(detail, str) and detail:
            message = message or detail
    if not message:
        message = response.reason_phrase or f"HTTP {response.status_code}"
    request_id = request_id or response.headers.get("X-Request-Id", "")
    return ErrorDetail(code=code, message=message[:2000], hint=hint[:2000], request_id=request_id, data=data)


def parse_retry_after(response: httpx.Response) -> float | None:
    """Return Retry-After in seconds (an HTTP-date is ignored, as the official client does)."""
    value = response.headers.get("Retry-After", "").strip()
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def _is_replayed(response: httpx.Response) -> bool:
    return response.headers.get("Idempotent-Replayed", "").strip().lower() == "true"


def classify_rent(response: httpx.Response | None, error: Exception | None = None) -> RentResult:
    """Classify one rent attempt from its response, or from the exception that stopped it.

    - confirmed: 2xx whose body does not say `success: false`;
    - refused: any other 4xx except 429 and the two idempotency 409s, or 2xx with `success: false`;
      nothing was rented (`replayed` says whether it was the stored answer to the first request);
    - inconclusive: the request may have left and no answer came (read timeout, connection lost),
      a 5xx, a 429, or 409 `idempotency_in_progress`; retry with the same key and bytes;
    - never_sent: the connection was never made, so no byte reached the server;
    - outcome_unknown: 409 `idempotency_outcome_unknown` (never clears upstream) or 422
      `idempotency_key_reused` (our bytes changed: a defect); stop and reconcile.
    """
    if response is None:
        if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout | httpx.UnsupportedProtocol):
            return RentResult(Classification.NEVER_SENT, message=_describe_transport_error(error))
        if isinstance(error, UnsafeRedirect):
            # The first request did reach the server (it answered with a redirect).
            return RentResult(Classification.INCONCLUSIVE, message=str(error))
        return RentResult(Classification.INCONCLUSIVE, message=_describe_transport_error(error))

    status = response.status_code
    replayed = _is_replayed(response)
    if 200 <= status < 300:
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            # A 2xx we cannot read: the order was accepted but we do not know its pods; reconcile.
            return RentResult(
                Classification.CONFIRMED,
                http_status=status,
                replayed=replayed,
                request_id=response.headers.get("X-Request-Id", ""),
                message="The API confirmed the order without a readable body.",
            )
        request_id = response.headers.get("X-Request-Id", "")
        if body.get("success") is False:
            return RentResult(
                Classification.REFUSED,
                http_status=status,
                replayed=replayed,
                request_id=request_id,
                message=str(body.get("message") or "The API refused the order."),
            )
        pod_ids = body.get("pod_ids")
        return RentResult(
            Classification.CONFIRMED,
            http_status=status,
            replayed=replayed,
            request_id=request_id,
            message=str(body.get("message") or ""),
            pod_ids=[str(pod) for pod in pod_ids] if isinstance(pod_ids, list) else [],
            cluster_id=str(body.get("cluster_id") or ""),
        )

    detail = parse_error(response)
    common: dict[str, Any] = {
        "http_status": status,
        "replayed": replayed,
        "request_id": detail.request_id,
        "error_code": detail.code,
        "message": detail.message,
        "hint": detail.hint,
    }
    if status == 429:
        return RentResult(Classification.INCONCLUSIVE, retry_after=parse_retry_after(response), **common)
    if status >= 500:
        return RentResult(Classification.INCONCLUSIVE, retry_after=parse_retry_after(response), **common)
    if status == 409 and detail.code == "idempotency_in_progress":
        return RentResult(Classification.INCONCLUSIVE, retry_after=parse_retry_after(response), **common)
    if status == 409 and detail.code == "idempotency_outcome_unknown":
        return RentResult(Classification.OUTCOME_UNKNOWN, **common)
    if status == 422 and detail.code == "idempotency_key_reused":
        return RentResult(Classification.OUTCOME_UNKNOWN, key_reused=True, **common)
    return RentResult(Classification.REFUSED, **common)


def _describe_transport_error(error: Exception | None) -> str:
    if error is None:
        return "No answer."
    kind = type(error).__name__
    if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout):
        return f"The Lium API could not be reached ({kind})."
    if isinstance(error, httpx.TimeoutException):
        return f"The Lium API did not answer in time ({kind})."
    return f"The connection to the Lium API was lost ({kind})."


# --- The client -------------------------------------------------------------------------------------------


def _error_for(response: httpx.Response) -> UpstreamError:
    detail = parse_error(response)
    kwargs: dict[str, Any] = {
        "status": response.status_code,
        "code": detail.code,
        "hint": detail.hint,
        "request_id": detail.request_id,
        "data": detail.data,
    }
    status = response.status_code
    if status == 429:
        return RateLimited(detail.message, retry_after=parse_retry_after(response), **kwargs)
    if status >= 500:
        return UpstreamUnavailable(f"Server error: {status}. {detail.message}", **kwargs)
    error_class: type[UpstreamError] = {
        401: AuthenticationFailed,
        403: PermissionDenied,
        404: NotFound,
        409: Conflict,
    }.get(status, UpstreamRejected)
    return error_class(detail.message, **kwargs)


class LiumClient:
    """Calls the Lium API with one credential over a shared `httpx.Client`."""

    def __init__(self, *, base_url: str, auth: Auth, http: httpx.Client) -> None:
        self.base_url = base_url.rstrip("/")
        self.auth = auth
        self.http = http

    def __repr__(self) -> str:
        return f"LiumClient(base_url={self.base_url!r})"

    # Transport ---------------------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        *,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
        keep_method: bool = False,
    ) -> httpx.Response:
        """Send one request, following redirects only within the same origin."""
        url = httpx.URL(self.base_url + path, params=params)
        origin = (url.scheme, url.host, url.port)
        all_headers = {**CLIENT_HEADERS, **(headers or {}), **self.auth.headers()}
        for _hop in range(MAX_REDIRECTS + 1):
            request = self.http.build_request(method, url, content=content, headers=all_headers)
            response = self.http.send(request, follow_redirects=False)
            if response.status_code not in (301, 302, 303, 307, 308):
                return response
            location = response.headers.get("Location")
            response.close()
            try:
                next_url = url.join(location) if location else None
            except httpx.InvalidURL:
                next_url = None
            if next_url is None:
                raise UnsafeRedirect("The API redirected without a valid Location; nothing was re-sent.")
            if (next_url.scheme, next_url.host, next_url.port) != origin:
                raise UnsafeRedirect(
                    f"The API redirected to another origin ({next_url.scheme}://{next_url.host}); "
                    "it was not followed so the credential stays with the API."
                )
            # Browsers' method rewriting: 302 and 303 become a GET (except HEAD), 301 turns a POST into a GET;
            # the rewritten request carries no body.
            rewrite = (response.status_code in (302, 303) and method != "HEAD") or (
                response.status_code == 301 and method == "POST"
            )
            if rewrite and keep_method:
                # A rent re-issued as a body-less GET could never rent, and its 2xx would prove nothing.
                raise UnsafeRedirect(
                    f"The API answered the rent with a {response.status_code} redirect; it was not followed as a GET."
                )
            if rewrite:
                method, content = "GET", None
                all_headers.pop("Content-Type", None)
            url = next_url
        raise UnsafeRedirect(f"More than {MAX_REDIRECTS} redirects; nothing was re-sent.")

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._send(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise UpstreamUnavailable(_describe_transport_error(exc)) from exc
        if response.status_code >= 400:
            raise _error_for(response)
        try:
            return response.json()
        except ValueError as exc:
            raise UpstreamUnavailable(f"The API answered {response.status_code} with a body that is not JSON.") from exc

    # Reads and writes ----------------------------------------------------------------------------------

    def version(self) -> dict[str, Any]:
        """Return `GET /version` (the `features` list says what the backend supports)."""
        return self._json("GET", "/version")

    def me(self) -> dict[str, Any]:
        """Return the account (`GET /users/me`), including its USD `balance`."""
        return self._json("GET", "/users/me")

    def list_offers(self) -> list[dict[str, Any]]:
        """Return the fabric offers: groups of free nodes on one RDMA fabric."""
        data = self._json("GET", "/executors/infiniband-clusters")
        return data if isinstance(data, list) else []

    def list_templates(self) -> list[dict[str, Any]]:
        data = self._json("GET", "/templates")
        return data if isinstance(data, list) else []

    def list_pods(self) -> list[dict[str, Any]]:
        """Return the caller's pods; clusters are found here only, by `cluster_id`."""
        data = self._json("GET", "/pods")
        return data if isinstance(data, list) else []

    def delete_cluster(self, cluster_id: str) -> dict[str, Any]:
        """Remove every member of a cluster; the answer has one row per member."""
        return self._json("DELETE", f"/clusters/{quote(cluster_id, safe='')}")

    def schedule_removal(self, pod_id: str, at_iso: str) -> dict[str, Any]:
        body = json.dumps({"removal_scheduled_at": at_iso}).encode()
        return self._json(
            "POST",
            f"/pods/{quote(pod_id, safe='')}/schedule-removal",
            content=body,
            headers={"Content-Type": "application/json"},
        )

    def rent_cluster(self, *, body: bytes, idempotency_key: str, customer_ref: str | None) -> RentResult:
        """Send the stored rent bytes with their key; classify whatever happens. Never raises."""
        headers = {"Content-Type": "application/json", "Idempotency-Key": idempotency_key}
        if customer_ref:
            headers["X-Customer-Ref"] = customer_ref
        try:
            response = self._send("POST", "/executors/cluster/rent", content=body, headers=headers, keep_method=True)
        except (httpx.HTTPError, UnsafeRedirect) as exc:
            return classify_rent(None, exc)
        return classify_rent(response)


# --- Building clients ----------------------------------------------------------------------------------

_http_clients: dict[str, httpx.Client] = {}
_http_clients_lock = threading.Lock()


def shared_http_client() -> httpx.Client:
    """Return this process's pooled `httpx.Client` (one per process; connections are reused)."""
    with _http_clients_lock:
        client = _http_clients.get("default")
        if client is None:
            client = httpx.Client(
                timeout=httpx.Timeout(settings.LIUM_TIMEOUT_SECONDS, connect=settings.LIUM_CONNECT_TIMEOUT_SECONDS),
                follow_redirects=False,
            )
            _http_clients["default"] = client
        return client


def client_for(credential: UpstreamCredential, *, http: httpx.Client | None = None) -> LiumClient:
    """Return a client that authenticates as `credential`. Tests pass `http` with a MockTransport."""
    return LiumClient(
        base_url=credential.effective_base_url,
        auth=Auth(scheme=credential.scheme, secret=credential.get_secret()),
        http=http or shared_http_client(),
    )
