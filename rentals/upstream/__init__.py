"""The only Lium API client: one module over an injected `httpx.Client`. No other module reads upstream JSON.

Reads return typed values (`rentals.upstream.parse` and its `parse_*` siblings, one per kind of answer: `PodRow`,
`PodEvent`, `DeleteResult`, `Features`, `Account`, `Fabric`, `TemplateRow`, `DeploymentEstimate`) or raise one
error tree:

    UpstreamError
    ├── UpstreamUnavailable        retry later: network error, timeout, 5xx; nothing is concluded
    │   ├── RateLimited            429; `retry_after` seconds when the server said
    │   └── MalformedAnswer        a 2xx whose body does not parse (not JSON, wrong shape, an id too long
    │       │                      for its column, larger than the body cap, a delete without member rows)
    │       └── ListingTooLarge    a pod listing longer than POD_LISTING_MAX_PODS rows: refused whole
    ├── UpstreamRejected           final: the server decided (4xx)
    │   ├── AuthenticationFailed   401
    │   ├── PermissionDenied       403 (scope, balance, ownership)
    │   ├── NotFound               404
    │   └── Conflict               409 (e.g. a member still being created)
    └── UnsafeRedirect             a redirect to another origin: never followed, nothing re-sent

A malformed answer is never a confirmation and never proof of absence: a listing that does not parse is an
error (not "no pods"), and a 2xx rent answer that does not parse is INCONCLUSIVE (see `rent_classify`).

The rent call never raises: `rent_cluster` returns a `RentResult` whose `classification` says what the
answer proves, because the rent engine must record every attempt, whatever happened.

Every call has one deadline (LIUM_TIMEOUT_SECONDS) across all redirect hops and the whole body: past it the
call is abandoned as a timeout, so a trickling answer cannot outlive the rent lease (settings check that
RENT_LEASE_SECONDS is longer). Bodies are capped (LISTING_BODY_MAX, ANSWER_BODY_MAX); a larger one does not
parse. The pod listing is parsed while it streams in (ijson), so memory holds the typed rows, not the body
(POD_LISTING_MAX_PODS caps its rows). The shared client keeps no cookies, so nothing one credential's answer
sets is sent with another's.

Redirects are followed here, never by httpx, and only to the same scheme, host and port (at most 5 hops),
so the API key never reaches another host.
"""

from __future__ import annotations

import contextvars
import http.cookiejar
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
from django.conf import settings

from accounts.models import UpstreamCredential
from rentals.models import RentAttempt
from rentals.upstream import (
    parse,
    parse_billing,
    parse_estimate,
    parse_events,
    parse_offers,
    parse_pods,
    parse_repair,
    parse_requests,
)
from rentals.upstream.parse import Unparseable

MAX_REDIRECTS = 5
CLIENT_HEADERS = {"X-Source": "dashboard", "User-Agent": "lium-cluster-dashboard/0.1"}
LISTING_BODY_MAX = 8 * 1024 * 1024  # pods, offers, templates
ANSWER_BODY_MAX = 1024 * 1024  # a rent, delete, version, account or error answer
# The streamed pod listing's byte cap is POD_LISTING_MAX_PODS rows of this size (a row is about 1.5 KB).
POD_ROW_BYTES_MAX = 16 * 1024
StreamParser = Callable[[Iterator[bytes]], Any]


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


class MalformedAnswer(UpstreamUnavailable):
    """A 2xx whose body could not be read; nothing may be concluded from it."""


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


class ListingTooLarge(MalformedAnswer):
    """A listing longer than the dashboard reads (POD_LISTING_MAX_PODS rows, or their byte cap): refused whole."""


class UnsafeRedirect(UpstreamError):
    """A redirect to another origin, a bad Location, or too many hops."""


class DeadlineExceeded(httpx.TimeoutException):
    """The call as a whole (every hop and the whole body) did not finish within its deadline."""


REJECTED_OF_STATUS = {401: AuthenticationFailed, 403: PermissionDenied, 404: NotFound, 409: Conflict}
NO_AUTH = "none"  # the shared config is public: no credential is sent to it


@dataclass(frozen=True)
class Auth:
    """How a credential authenticates: `X-API-Key` or `Authorization: Bearer`."""

    scheme: str
    secret: str = field(repr=False)

    def headers(self) -> dict[str, str]:
        if self.scheme == NO_AUTH:
            return {}
        if self.scheme == UpstreamCredential.Scheme.BEARER:
            return {"Authorization": f"Bearer {self.secret}"}
        return {"X-API-Key": self.secret}

    def __repr__(self) -> str:  # never show the secret, even in a traceback's locals
        return f"Auth(scheme={self.scheme!r}, secret=<hidden>)"


# What one rent answer proves: the values a `RentAttempt` stores.
Classification = RentAttempt.Classification


@dataclass(frozen=True)
class RentResult:
    """One rent attempt, classified. Every string fits the column it is stored in."""

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


@dataclass(frozen=True)
class Answer:
    """One complete HTTP answer: status, headers and the whole body (None when it was over the cap)."""

    status: int
    headers: httpx.Headers
    reason: str = ""
    body: bytes | None = b""
    # What a streamed 2xx body was parsed into while it arrived (the body itself is never held).
    parsed: Any = None

    def json(self) -> Any:
        """Decode the body; raise Unparseable when it is too large or not JSON."""
        if self.body is None:
            raise Unparseable("The answer was larger than the client accepts.")
        try:
            return json.loads(self.body)
        except (ValueError, RecursionError) as exc:
            raise Unparseable(f"The API answered {self.status} with a body that is not JSON.") from exc

    @property
    def request_id(self) -> str:
        return parse.request_id(self.headers.get("X-Request-Id", ""))

    @property
    def replayed(self) -> bool:
        return self.headers.get("Idempotent-Replayed", "").strip().lower() == "true"


# --- Reading answers --------------------------------------------------------------------------------------


def error_parse(answer: Answer) -> parse.ErrorDetail:
    """Read an error answer's envelope; an unreadable body leaves only the status to go by."""
    try:
        body = answer.json()
    except Unparseable:
        body = None
    return parse.error_detail(
        body,
        header_request_id=answer.headers.get("X-Request-Id", ""),
        fallback=answer.reason or f"HTTP {answer.status}",
    )


def retry_after_parse(answer: Answer) -> float | None:
    """Return Retry-After in seconds (an HTTP-date is ignored, as the official client does)."""
    value = answer.headers.get("Retry-After", "").strip()
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if 0 <= seconds < 10**7 else None


def rent_classify(answer: Answer | None, error: Exception | None = None) -> RentResult:
    """Classify one rent attempt from its answer, or from the exception that stopped it.

    - confirmed: 2xx whose body is an object that does not say `success: false`, with well-formed
      `pod_ids` and `cluster_id` when present (without them the members are found in `GET /pods`);
    - refused: any other 4xx except 429 and the two idempotency 409s, or 2xx with `success: false`;
      nothing was rented (`replayed` says whether it was the stored answer to the first request);
    - inconclusive: the request may have left and no usable answer came (timeout or the call's deadline,
      connection lost), a 2xx whose body does not parse (not a JSON object, `success` not a bool, a pod or
      cluster id that is not a short string, over the body cap), a 5xx, a 429, or 409
      `idempotency_in_progress`; retry with the same key and bytes;
    - never_sent: the connection was never made, so no byte reached the server;
    - outcome_unknown: 409 `idempotency_outcome_unknown` (never clears upstream) or 422
      `idempotency_key_reused` (our bytes changed: a defect); stop and reconcile.
    """
    if answer is None:
        if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout | httpx.UnsupportedProtocol):
            return RentResult(Classification.NEVER_SENT, message=_describe_transport_error(error))
        if isinstance(error, UnsafeRedirect):
            # The first request did reach the server (it answered with a redirect).
            return RentResult(Classification.INCONCLUSIVE, message=parse.text(str(error)))
        return RentResult(Classification.INCONCLUSIVE, message=_describe_transport_error(error))

    status = answer.status
    common: dict[str, Any] = {"http_status": status, "replayed": answer.replayed, "request_id": answer.request_id}
    if 200 <= status < 300:
        try:
            body = parse.rent_body(answer.json())
        except Unparseable as exc:
            # The order may or may not have been taken: retry with the same key, or settle unknown.
            return RentResult(
                Classification.INCONCLUSIVE, message=f"A {status} answer that cannot be read: {exc}", **common
            )
        if body.success is False:
            return RentResult(Classification.REFUSED, message=body.message or "The API refused the order.", **common)
        return RentResult(
            Classification.CONFIRMED, message=body.message, pod_ids=body.pod_ids, cluster_id=body.cluster_id, **common
        )

    detail = error_parse(answer)
    common.update(request_id=detail.request_id, error_code=detail.code, message=detail.message, hint=detail.hint)
    if status == 429 or status >= 500 or (status == 409 and detail.code == "idempotency_in_progress"):
        return RentResult(Classification.INCONCLUSIVE, retry_after=retry_after_parse(answer), **common)
    if status == 409 and detail.code == "idempotency_outcome_unknown":
        return RentResult(Classification.OUTCOME_UNKNOWN, **common)
    if status == 422 and detail.code == "idempotency_key_reused":
        return RentResult(Classification.OUTCOME_UNKNOWN, key_reused=True, **common)
    if not 400 <= status < 500:
        # 1xx or 3xx here (a redirect we did not follow): not a decision.
        return RentResult(Classification.INCONCLUSIVE, **common)
    return RentResult(Classification.REFUSED, **common)


def _describe_transport_error(error: Exception | None) -> str:
    if error is None:
        return "No answer."
    kind = type(error).__name__
    if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout):
        return f"The Lium API could not be reached ({kind})."
    if isinstance(error, DeadlineExceeded):
        return f"The Lium API did not answer in time: {error}"
    if isinstance(error, httpx.TimeoutException):
        return f"The Lium API did not answer in time ({kind})."
    return f"The connection to the Lium API was lost ({kind})."


def _error_for(answer: Answer) -> UpstreamError:
    detail = error_parse(answer)
    kwargs: dict[str, Any] = {
        "status": answer.status,
        "code": detail.code,
        "hint": detail.hint,
        "request_id": detail.request_id,
        "data": detail.data,
    }
    status = answer.status
    if status == 429:
        return RateLimited(detail.message, retry_after=retry_after_parse(answer), **kwargs)
    if status >= 500 or status < 400:
        return UpstreamUnavailable(f"Server error: {status}. {detail.message}", **kwargs)
    return REJECTED_OF_STATUS.get(status, UpstreamRejected)(detail.message, **kwargs)


# --- The client -------------------------------------------------------------------------------------------


class LiumClient:
    """Calls the Lium API with one credential over a shared `httpx.Client`."""

    def __init__(self, *, base_url: str, auth: Auth, http: httpx.Client) -> None:
        self.base_url = base_url.rstrip("/")
        self.auth = auth
        self.http = http

    def __repr__(self) -> str:
        return f"LiumClient(base_url={self.base_url!r})"

    # Transport ---------------------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        body_max: int = ANSWER_BODY_MAX,
        budget_seconds: float | None = None,
        stream: StreamParser | None = None,
        **kwargs: Any,
    ) -> Answer:
        """Send one request and read its whole answer within the call's deadline, or raise DeadlineExceeded.

        The deadline is LIUM_TIMEOUT_SECONDS, or `budget_seconds` when shorter (a read a page waits for).

        The exchange runs in a helper thread and this one waits at most until the deadline: httpx's timeouts
        apply per phase and per read, so only a watch from outside bounds a trickling answer. The abandoned
        helper stops by itself: it checks the deadline between body chunks, and each of its reads is capped by
        the time that was left when its hop began.
        """
        budget = float(settings.LIUM_TIMEOUT_SECONDS)
        if budget_seconds is not None:
            budget = min(budget, budget_seconds)
        deadline = time.monotonic() + budget
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def exchange() -> None:
            try:
                outcome["answer"] = self._exchange(
                    method, path, deadline=deadline, body_max=body_max, stream=stream, **kwargs
                )
            except BaseException as exc:  # handed to the waiting thread, which raises it
                outcome["error"] = exc
            finally:
                done.set()

        context = contextvars.copy_context()
        threading.Thread(target=context.run, args=(exchange,), name="lium-call", daemon=True).start()
        if not done.wait(max(0.0, deadline - time.monotonic())):
            raise DeadlineExceeded(f"no complete answer within {budget:g} s; the call was abandoned.")
        if "error" in outcome:
            raise outcome["error"]
        return outcome["answer"]

    def _exchange(
        self,
        method: str,
        path: str,
        *,
        deadline: float,
        body_max: int,
        stream: StreamParser | None = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
        keep_method: bool = False,
    ) -> Answer:
        """Send one request, following redirects only within the same origin; read the final body."""
        url = httpx.URL(self.base_url + path, params=params)
        origin = (url.scheme, url.host, url.port)
        all_headers = {**CLIENT_HEADERS, **(headers or {}), **self.auth.headers()}
        for hop in range(MAX_REDIRECTS + 1):
            left = _time_left(deadline)
            timeout = httpx.Timeout(
                min(float(settings.LIUM_TIMEOUT_SECONDS), left),
                connect=min(float(settings.LIUM_CONNECT_TIMEOUT_SECONDS), left),
            )
            request = self.http.build_request(method, url, content=content, headers=all_headers, timeout=timeout)
            try:
                response = self.http.send(request, follow_redirects=False, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
                if hop == 0:
                    raise
                # The server did receive the first request (it answered with a redirect): not "never sent".
                raise httpx.RemoteProtocolError(
                    f"A redirect hop could not connect ({type(exc).__name__}) after the first request was answered.",
                    request=request,
                ) from exc
            try:
                if stream is not None and 200 <= response.status_code < 300:
                    return Answer(
                        status=response.status_code,
                        headers=response.headers,
                        parsed=stream(_chunks_capped(response, deadline=deadline, limit=body_max)),
                    )
                if response.status_code not in (301, 302, 303, 307, 308):
                    return Answer(
                        status=response.status_code,
                        headers=response.headers,
                        reason=parse.text(response.reason_phrase, 200),
                        body=_body_read_capped(response, deadline=deadline, limit=body_max),
                    )
            finally:
                response.close()
            next_url = _redirect_target(url, response, origin)
            if _rewrites_to_get(response.status_code, method, keep_method=keep_method):
                method, content = "GET", None
                all_headers.pop("Content-Type", None)
            url = next_url
        raise UnsafeRedirect(f"More than {MAX_REDIRECTS} redirects; nothing was re-sent.")

    def _read(
        self,
        method: str,
        path: str,
        parser: Callable[[Any], Any] | None,
        *,
        body_max: int = ANSWER_BODY_MAX,
        json_body: Any = None,
        **kwargs: Any,
    ) -> Any:
        """Call, raise the error tree for a failure, and parse a 2xx with `parser` (MalformedAnswer if it fails).

        `json_body` is sent encoded as JSON. Without a parser, the 2xx body was read by `stream` as it arrived.
        """
        if json_body is not None:
            kwargs.update(content=json.dumps(json_body).encode(), headers={"Content-Type": "application/json"})
        try:
            answer = self._call(method, path, body_max=body_max, **kwargs)
        except httpx.HTTPError as exc:
            raise UpstreamUnavailable(_describe_transport_error(exc)) from exc
        except parse_pods.TooManyRows as exc:
            raise ListingTooLarge(f"The pod listing was refused: {exc}", status=200) from exc
        except Unparseable as exc:  # a streamed body
            raise MalformedAnswer(f"The API's answer to {method} {path} cannot be read: {exc}", status=200) from exc
        if not 200 <= answer.status < 300:
            raise _error_for(answer)
        if parser is None:
            return answer.parsed
        try:
            return parser(answer.json())
        except Unparseable as exc:
            raise MalformedAnswer(
                f"The API's {answer.status} answer to {method} {path} cannot be read: {exc}",
                status=answer.status,
                request_id=answer.request_id,
            ) from exc

    # Reads and writes ----------------------------------------------------------------------------------

    def version(self) -> parse.Features:
        """Return the optional features of `GET /version` (e.g. `rent_idempotency`)."""
        return self._read("GET", "/version", parse.features)

    def me(self) -> parse.Account:
        """Return the account (`GET /users/me`), with its USD `balance` (None when not given)."""
        return self._read("GET", "/users/me", parse.account)

    def list_offers(self) -> list[parse_offers.Fabric]:
        """Return the fabric offers: groups of free nodes on one RDMA fabric."""
        return self._read(
            "GET", "/executors/infiniband-clusters", parse_offers.offer_listing, body_max=LISTING_BODY_MAX
        )

    def list_templates(self) -> list[parse_offers.TemplateRow]:
        return self._read("GET", "/templates", parse_offers.template_listing, body_max=LISTING_BODY_MAX)

    def list_pods(self) -> list[parse_pods.PodRow]:
        """Return the caller's pods; clusters are found here only, by `cluster_id`. Never [] for a bad body.

        The listing is parsed row by row while it arrives (a large account's runs to tens of MB), so only the
        typed rows are held; one longer than POD_LISTING_MAX_PODS rows is refused whole (ListingTooLarge).
        """
        max_pods = int(settings.POD_LISTING_MAX_PODS)
        return self._read(
            "GET",
            "/pods",
            None,
            body_max=max_pods * POD_ROW_BYTES_MAX,
            stream=lambda chunks: parse_pods.pod_listing_stream(chunks, max_pods=max_pods),
        )

    def billing_statement(self, *, start_day: str, end_day: str) -> parse_billing.Statement:
        """Return the account's ledger per pod for [start_day, end_day] (UTC `YYYY-MM-DD`, inclusive)."""
        return self._read(
            "GET",
            "/billing/statement",
            parse_billing.statement,
            body_max=LISTING_BODY_MAX,
            params={"start_day": start_day, "end_day": end_day},
        )

    def delete_cluster(self, cluster_id: str) -> parse_pods.DeleteResult:
        """Remove every member of a cluster; the answer has one row per member (none: MalformedAnswer)."""
        return self._read("DELETE", f"/clusters/{quote(cluster_id, safe='')}", parse_pods.delete_result)

    def schedule_removal(self, pod_id: str, at_iso: str) -> None:
        """Ask the upstream to remove one member at `at_iso` (safe to repeat); the answer's body is not read."""
        path = f"/pods/{quote(pod_id, safe='')}/schedule-removal"
        self._read("POST", path, lambda body: None, json_body={"removal_scheduled_at": at_iso})

    def cancel_removal(self, pod_id: str) -> None:
        """Cancel one member's scheduled removal (safe to repeat); the answer's body is not read."""
        self._read("DELETE", f"/pods/{quote(pod_id, safe='')}/schedule-removal", lambda body: None)

    def pod_reboot(self, pod_id: str) -> None:
        """Reboot one pod (`POST /pods/{id}/reboot`, body `{}`): it turns REBOOT_PENDING, then RUNNING or
        REBOOT_FAILED, as the pod listing shows; the answer's body is not read (§17). Not safe to repeat."""
        self._read("POST", f"/pods/{quote(pod_id, safe='')}/reboot", lambda body: None, json_body={})

    def pod_reset_gpu(self, pod_id: str, gpu_indices: list[int] | None = None) -> parse_repair.ResetStatus:
        """Start a reset of the pod's GPUs (None: all); 202 `{request_id, status: "running"}`. Lium allows one a
        minute per pod: a second one raises RateLimited (429). Sent once, never retried here (§17)."""
        path = f"/pods/{quote(pod_id, safe='')}/reset-gpu"
        return self._read("POST", path, parse_repair.reset_status, json_body={"gpu_indices": gpu_indices})

    def pod_reset_gpu_status(self, pod_id: str, request_id: str) -> parse_repair.ResetStatus:
        """Read a GPU reset: running, then done|failed|timeout with each GPU's result. A 409 listing `gpus` is
        the official client's "a GPU failed": returned as a failed reset."""
        path = f"/pods/{quote(pod_id, safe='')}/reset-gpu/{quote(request_id, safe='')}"
        try:
            return self._read("GET", path, parse_repair.reset_status)
        except Conflict as exc:
            failed = parse_repair.reset_conflict(exc.data, request_id)
            if failed is None:
                raise
            return failed

    def pod_events(self, pod_id: str) -> list[parse_pods.PodEvent]:
        """Return what happened to one pod, oldest first; [] when the upstream knows no such pod (404)."""
        try:
            return self._read(
                "GET", f"/pods/{quote(pod_id, safe='')}/events", parse_pods.pod_event_listing, body_max=LISTING_BODY_MAX
            )
        except NotFound:
            return []

    def deployment_estimate(
        self, executor_id: str, template_id: str, *, budget_seconds: float | None = None
    ) -> parse_estimate.DeploymentEstimate:
        """Return how long a pod of `template_id` is expected to take to start on `executor_id` (§17)."""
        params = {"executor_id": executor_id, "template_id": template_id}
        return self._read(
            "GET",
            "/executors/deployment-estimate",
            parse_estimate.deployment_estimate,
            params=params,
            budget_seconds=budget_seconds,
        )

    def cluster_switch(self) -> bool | None:
        """Return Lium's cluster switch (`multinode_clusters_enabled` of `GET /v1/shared-config`); None: absent."""
        return self._read("GET", "/v1/shared-config", parse_events.cluster_switch)

    def account_events(self, *, since: str | None, limit: int) -> list[parse_events.AccountEvent]:
        """Return the account's events since `since` (ISO, inclusive upstream), oldest first (no cursor upstream)."""
        params = {"limit": str(limit), **({"since": since} if since else {})}
        return self._read(
            "GET", "/users/me/events", parse_events.account_event_listing, body_max=LISTING_BODY_MAX, params=params
        )

    def machine_request(self, *, machine_name: str) -> parse_requests.MachineRequestAnswer:
        """Tell Lium that machines of this kind are wanted (`POST /machine-requests`): a demand signal, not an order."""
        wanted = {"machine_name": machine_name}
        return self._read("POST", "/machine-requests", parse_requests.machine_request_answer, json_body=wanted)

    def rent_cluster(self, *, body: bytes, idempotency_key: str, customer_ref: str | None) -> RentResult:
        """Send the stored rent bytes with their key; classify whatever happens. Never raises."""
        headers = {"Content-Type": "application/json", "Idempotency-Key": idempotency_key}
        if customer_ref:
            headers["X-Customer-Ref"] = customer_ref
        try:
            answer = self._call(
                "POST",
                "/executors/cluster/rent",
                content=body,
                headers=headers,
                keep_method=True,
                body_max=ANSWER_BODY_MAX,
            )
        except (httpx.HTTPError, UnsafeRedirect) as exc:
            return rent_classify(None, exc)
        return rent_classify(answer)


def _time_left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise DeadlineExceeded("the call's deadline passed between redirect hops.")
    return left


def _chunks_capped(response: httpx.Response, *, deadline: float, limit: int) -> Iterator[bytes]:
    """Yield the (decoded) body's chunks before the deadline; raise TooManyRows once it grows past `limit`."""
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            raise parse_pods.TooManyRows(f"the body is larger than {limit} bytes.")
        yield chunk
        _time_left(deadline)


def _body_read_capped(response: httpx.Response, *, deadline: float, limit: int) -> bytes | None:
    """Read the whole (decoded) body before the deadline; None once it grows past `limit` bytes."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    try:
        return b"".join(_chunks_capped(response, deadline=deadline, limit=limit))
    except parse_pods.TooManyRows:
        return None


# --- Building clients ----------------------------------------------------------------------------------


def _redirect_target(url: httpx.URL, response: httpx.Response, origin: tuple[str, str, int | None]) -> httpx.URL:
    """Return where a redirect leads; refuse one without a valid Location or to another origin."""
    location = response.headers.get("Location")
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
    return next_url


def _rewrites_to_get(status: int, method: str, *, keep_method: bool) -> bool:
    """Return whether a browser would re-issue this redirect as a body-less GET (refused when `keep_method`)."""
    # Browsers' method rewriting: 302 and 303 become a GET (except HEAD), 301 turns a POST into a GET.
    rewrite = (status in (302, 303) and method != "HEAD") or (status == 301 and method == "POST")
    if rewrite and keep_method:
        # A rent re-issued as a body-less GET could never rent, and its 2xx would prove nothing.
        raise UnsafeRedirect(f"The API answered the rent with a {status} redirect; it was not followed as a GET.")
    return rewrite


def new_http_client(*, transport: httpx.BaseTransport | None = None) -> httpx.Client:
    """Return an `httpx.Client` configured as the upstream needs: no cookies, no redirects, our timeouts."""
    return httpx.Client(
        timeout=httpx.Timeout(settings.LIUM_TIMEOUT_SECONDS, connect=settings.LIUM_CONNECT_TIMEOUT_SECONDS),
        follow_redirects=False,
        # No connection cap: RENT_INFLIGHT_PER_CREDENTIAL and RENT_INFLIGHT_GLOBAL (and the worker's threads)
        # bound the calls in flight; httpx's default of 100 connections was a hidden third cap.
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=20),
        # Neither store nor send any cookie (no domain is allowed): one client serves every credential.
        cookies=http.cookiejar.CookieJar(policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[])),
        transport=transport,
    )


_http_client: httpx.Client | None = None
_http_client_lock = threading.Lock()


def shared_http_client() -> httpx.Client:
    """Return this process's pooled `httpx.Client` (one per process; connections are reused)."""
    global _http_client
    with _http_client_lock:
        if _http_client is None:
            _http_client = new_http_client()
        return _http_client


def public_client(base_url: str, *, http: httpx.Client | None = None) -> LiumClient:
    """Return a client that sends no credential (the shared config is public)."""
    return LiumClient(base_url=base_url, auth=Auth(scheme=NO_AUTH, secret=""), http=http or shared_http_client())


def client_for(credential: UpstreamCredential, *, http: httpx.Client | None = None) -> LiumClient:
    """Return a client that authenticates as `credential`. Tests pass `http` with a MockTransport."""
    return LiumClient(
        base_url=credential.effective_base_url,
        auth=Auth(scheme=credential.scheme, secret=credential.get_secret()),
        http=http or shared_http_client(),
    )
