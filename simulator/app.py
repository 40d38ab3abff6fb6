"""WSGI application: routing (at /<path> and /api/<path>), request ids and the error envelope."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from . import activity, machine_requests, routes_billing
from . import routes_api as api
from . import routes_repair as repair
from . import routes_sim as sim
from .errors import ApiError, envelope, new_request_id
from .estimates import deployment_estimate, slow_executors
from .httpkit import DropConnection, drop, json_response
from .misbehaviour import cookie_header, trickle_existing
from .request_log import open_entry
from .routes_rent import handle_rent
from .state import State

log = logging.getLogger("simulator")

# (path, methods, handler, route name as used by fault rules and the request log)
PUBLIC: list[tuple[str, list[str], Callable[..., Response], str]] = [
    ("/version", ["GET"], api.version, "version"),
    ("/executors/infiniband-clusters", ["GET"], api.offers, "offers"),
    ("/templates", ["GET"], api.templates, "templates"),
    ("/ssh-keys", ["GET"], api.list_ssh_keys, "ssh-keys"),
    ("/ssh-keys", ["POST"], api.add_ssh_key, "ssh-keys"),
    ("/executors/cluster/rent", ["POST"], handle_rent, "rent"),
    ("/pods", ["GET"], api.list_pods, "pods"),
    ("/clusters/<path:cluster_id>", ["DELETE"], api.delete_cluster, "delete"),
    ("/pods/<pod_id>/schedule-removal", ["POST", "DELETE"], api.schedule_removal, "schedule-removal"),
    ("/pods/<pod_id>/events", ["GET"], api.pod_events, "events"),
    ("/users/me", ["GET"], api.users_me, "users"),
    ("/executors/deployment-estimate", ["GET"], deployment_estimate, "estimate"),
    ("/users/me/events", ["GET"], activity.user_events, "user-events"),
    ("/v1/shared-config", ["GET"], activity.shared_config, "shared-config"),
    ("/pods/<pod_id>/reboot", ["POST"], repair.reboot, "reboot"),
    ("/pods/<pod_id>/reset-gpu", ["POST"], repair.reset_gpu, "reset-gpu"),
    ("/pods/<pod_id>/reset-gpu/<request_id>", ["GET"], repair.reset_gpu_status, "reset-gpu"),
    ("/billing/statement", ["GET"], routes_billing.statement, "statement"),
    ("/machine-requests", ["POST"], machine_requests.create, "machine-requests"),
    ("/machine-requests", ["GET"], machine_requests.listing, "machine-requests"),
]

CONTROL: list[tuple[str, list[str], Callable[..., Response]]] = [
    ("/_sim/faults", ["GET", "POST", "DELETE"], sim.faults),
    ("/_sim/clock", ["GET", "POST"], sim.clock),
    ("/_sim/config", ["GET", "POST"], sim.config),
    ("/_sim/ledger", ["GET"], sim.ledger),
    ("/_sim/requests", ["GET"], sim.requests_log),
    ("/_sim/reset", ["POST"], sim.reset),
    ("/_sim/slow-executors", ["GET", "POST", "DELETE"], slow_executors),
    ("/_sim/out-of-band", ["POST"], activity.out_of_band),
    ("/_sim/pods/<pod_id>/authorized-keys", ["GET"], sim.authorized_keys),
    ("/_sim/billing", ["GET", "POST"], routes_billing.skew),
]


def create_app(state: State) -> Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]:
    """Build the WSGI app; control routes exist only outside prod mode."""
    routes: list[tuple[str, list[str], Callable[..., Response], str | None]] = list(PUBLIC)
    if state.options.mode != "prod":
        routes += [(path, methods, handler, None) for path, methods, handler in CONTROL]
    handlers: dict[str, tuple[Callable[..., Response], str | None]] = {}
    rules = []
    for i, (path, methods, handler, route) in enumerate(routes):
        endpoint = f"r{i}"
        handlers[endpoint] = (handler, route)
        rules.append(Rule(path, methods=methods, endpoint=endpoint))
    url_map = Map(rules, strict_slashes=False, merge_slashes=False)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        request = Request(environ)
        rid = new_request_id()
        environ["lium_sim.request_id"] = rid  # the rent route stores it in its recorded answer
        path = request.path
        # Serve every route at /<path> and /api/<path>, so ".../api" works as a base URL.
        if path == "/api" or path.startswith("/api/"):
            path = path[4:] or "/"
        route: str | None = None  # set for public routes only; control calls are not logged
        entry: dict[str, Any] | None = None
        try:
            adapter = url_map.bind_to_environ(environ)
            endpoint, args = adapter.match(path, method=request.method)
            handler, route = handlers[endpoint]
            if route is not None:
                entry = open_entry(state, request, rid, route)
                environ["lium_sim.log_entry"] = entry
            response = handler(state, request, **args)
        except DropConnection:
            if entry is not None:
                entry["dropped"] = True
            drop(environ)
            start_response("500 Dropped", [("Content-Length", "0")])
            return [b""]
        except ApiError as err:
            shown = environ.get("lium_sim.shown_request_id", rid)
            response = json_response(envelope(err, shown), err.status, err.headers)
        except MethodNotAllowed as exc:
            not_allowed = ApiError(405, "method_not_allowed", f"Method {request.method} not allowed on {path}")
            allow = {"Allow": ", ".join(exc.valid_methods or [])}
            response = json_response(envelope(not_allowed, rid), 405, allow)
        except NotFound:
            response = json_response(envelope(ApiError(404, "not_found", f"Not found: {path}"), rid), 404)
        except HTTPException as exc:
            code = exc.code or 500
            response = json_response(envelope(ApiError(code, "http_error", exc.description or ""), rid), code)
        except Exception:
            log.exception("unhandled error on %s %s", request.method, path)
            response = json_response(envelope(ApiError(500, "internal_error", "Internal server error"), rid), 500)
        response.headers["X-Request-Id"] = environ.get("lium_sim.shown_request_id", rid)
        if route is not None:
            response = _misbehave(state, route, response)
        if entry is not None:
            entry["status"] = response.status_code
        return response(environ, start_response)

    return app


def _misbehave(state: State, route: str, response: Response) -> Response:
    """Apply the rules that work on any route's finished answer: set_cookie and trickle."""
    cookie = state.faults.take("set_cookie", route)
    if cookie:
        response.headers.add("Set-Cookie", cookie_header(cookie.get("name", "lium_session")))
    # The rent route trickles by itself, because there the rule also decides whether the order commits.
    trickle = state.faults.take("trickle", route) if route != "rent" else None
    if trickle:
        response = trickle_existing(response, trickle, state.stopping)
    return response
