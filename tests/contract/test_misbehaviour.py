"""The simulator's misbehaviour switches and fault rules, seen as a client sees them over real HTTP."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
import uuid
from urllib.parse import quote

import httpx
import pytest

from .conftest import Api, start_simulator, stop_simulator

pytestmark = [pytest.mark.sim_only, pytest.mark.rents]

LONG = 300  # "over-long" ids are at least this many characters


def _body(api: Api) -> bytes:
    return json.dumps(api.order(api.cheapest(2))).encode()


def _post(api: Api, body: bytes, idem: str | None = None, **kw: object) -> httpx.Response:
    """POST a rent without assuming the answer is JSON."""
    headers = api.headers(**{"Content-Type": "application/json"})
    if idem is not None:
        headers["Idempotency-Key"] = idem
    return api.http.post("/executors/cluster/rent", content=body, headers=headers, **kw)  # type: ignore[arg-type]


def _rejected(api: Api, rule: dict[str, object]) -> str:
    r = api.http.post("/_sim/faults", json={"rules": [rule]})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "invalid_faults"
    return str(r.json()["error"]["message"])


# -- honour_idempotency_key --------------------------------------------------------------


def test_honour_idempotency_key_defaults_to_true(api: Api) -> None:
    assert api.sim("GET", "config")["honour_idempotency_key"] is True


def test_not_honouring_idempotency_drops_the_feature_and_rents_twice(api: Api) -> None:
    api.config(honour_idempotency_key=False, features=["rent_idempotency", "rent_by_spec"])
    assert api.get("/version").json()["features"] == ["rent_by_spec"]
    key = str(uuid.uuid4())
    body = json.dumps(api.order(api.cheapest(2))).encode()
    first = _post(api, body, idem=key)
    assert first.status_code == 200, first.text
    replacement = json.loads(body)
    replacement["executor_uuids"] = api.cheapest(2)  # the first nodes are taken now
    second_body = json.dumps(replacement).encode()
    second = _post(api, second_body, idem=key)
    assert second.status_code == 200, second.text  # not 422 idempotency_key_reused: the key is ignored
    assert "Idempotent-Replayed" not in second.headers
    assert first.json()["cluster_id"] != second.json()["cluster_id"]
    ledger = api.sim("GET", "ledger")
    assert [e["idempotency_key"] for e in ledger] == [key, key]
    assert len({e["cluster_id"] for e in ledger}) == 2
    assert len(api.pods()) == 4


def test_not_honouring_idempotency_same_bytes_really_rents_again(api: Api) -> None:
    api.config(honour_idempotency_key=False, replenish=False)
    key = str(uuid.uuid4())
    body = _body(api)
    assert _post(api, body, idem=key).status_code == 200
    again = _post(api, body, idem=key)
    # The same nodes are taken, so the repeat is processed as a new order and refused: no replay.
    assert again.status_code == 409, again.text
    assert again.json()["error"]["code"] == "executor_not_available"
    assert "Idempotent-Replayed" not in again.headers


def test_not_honouring_idempotency_ignores_a_malformed_key(api: Api) -> None:
    api.config(honour_idempotency_key=False)
    assert _post(api, _body(api), idem="has spaces in it").status_code == 200


def test_not_honouring_idempotency_rents_the_same_bytes_again_once_the_nodes_are_free(api: Api) -> None:
    api.config(honour_idempotency_key=False)
    key, body = str(uuid.uuid4()), _body(api)
    first = _post(api, body, idem=key)
    assert first.status_code == 200
    cluster_id = first.json()["cluster_id"]
    assert api.http.delete(f"/clusters/{cluster_id}", headers=api.headers()).status_code == 200
    api.advance(2)  # the members are gone and their nodes free again
    again = _post(api, body, idem=key)
    assert again.status_code == 200 and "Idempotent-Replayed" not in again.headers
    assert again.json()["cluster_id"] != cluster_id
    ledger = api.sim("GET", "ledger")
    assert [e["idempotency_key"] for e in ledger] == [key, key]
    assert ledger[0]["body_sha256"] == ledger[1]["body_sha256"]


# -- html_2xx and empty_2xx ---------------------------------------------------------------


def test_html_2xx_commits_and_a_retry_replays_the_real_answer(api: Api) -> None:
    api.faults({"fault": "html_2xx", "next": 1})
    key, body = str(uuid.uuid4()), _body(api)
    r = _post(api, body, idem=key)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/html")
    assert "<html" in r.text.lower() and "maintenance" in r.text.lower()
    ledger = api.sim("GET", "ledger")
    assert len(ledger) == 1 and len(api.pods()) == 2
    again = _post(api, body, idem=key)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["cluster_id"] == ledger[0]["cluster_id"]


def test_html_2xx_without_commit_rents_nothing_and_frees_the_key(api: Api) -> None:
    api.faults({"fault": "html_2xx", "next": 1, "commit": False})
    key, body = str(uuid.uuid4()), _body(api)
    r = _post(api, body, idem=key)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    assert api.sim("GET", "ledger") == [] and api.pods() == []
    again = _post(api, body, idem=key)
    assert again.status_code == 200 and "Idempotent-Replayed" not in again.headers
    assert len(api.sim("GET", "ledger")) == 1


def test_empty_2xx_commits_by_default(api: Api) -> None:
    api.faults({"fault": "empty_2xx", "next": 1})
    r = _post(api, _body(api), idem=str(uuid.uuid4()))
    assert r.status_code == 200 and r.content == b""
    assert len(api.sim("GET", "ledger")) == 1 and len(api.pods()) == 2


def test_empty_2xx_with_status_and_no_commit(api: Api) -> None:
    api.faults({"fault": "empty_2xx", "next": 1, "status": 202, "commit": False})
    r = _post(api, _body(api))
    assert r.status_code == 202 and r.content == b""
    assert api.sim("GET", "ledger") == [] and api.pods() == []


# -- no_pod_ids and long_ids --------------------------------------------------------------


def test_no_pod_ids_commits_and_pods_are_listed(api: Api) -> None:
    api.faults({"fault": "no_pod_ids", "next": 1})
    r = _post(api, _body(api))
    assert r.status_code == 200
    assert r.json() == {"success": True}
    ledger = api.sim("GET", "ledger")
    assert len(ledger) == 1
    assert {p["id"] for p in api.pods()} == set(ledger[0]["pod_ids"])


def test_long_ids_on_rent_answer_only(api: Api) -> None:
    api.faults({"fault": "long_ids", "next": 1})
    r = _post(api, _body(api))
    assert r.status_code == 200
    answer = r.json()
    assert len(answer["pod_ids"]) == 2
    assert all(len(p) >= LONG for p in answer["pod_ids"])
    assert len(answer["cluster_id"]) >= LONG
    assert len(r.headers["X-Request-Id"]) >= LONG
    ledger = api.sim("GET", "ledger")[0]
    pods = api.pods()
    assert {p["id"] for p in pods} == set(ledger["pod_ids"])
    assert all(len(p["id"]) < 64 and len(p["cluster_id"]) < 64 for p in pods)


def test_long_ids_on_a_refusal_lengthens_the_envelope_request_id(api: Api) -> None:
    api.faults({"fault": "long_ids", "next": 1})
    r = _post(api, json.dumps(api.order(api.cheapest(2), termination_hours=0)).encode())
    assert r.status_code == 422
    assert len(r.json()["error"]["request_id"]) >= LONG
    assert r.json()["error"]["request_id"] == r.headers["X-Request-Id"]


def test_long_ids_on_pods_route(api: Api) -> None:
    assert _post(api, _body(api)).status_code == 200
    api.faults({"fault": "long_ids", "route": "pods", "next": 1})
    r = api.get("/pods")
    assert r.status_code == 200
    assert all(len(p["id"]) >= LONG and len(p["cluster_id"]) >= LONG for p in r.json())
    assert len(r.headers["X-Request-Id"]) >= LONG
    assert all(len(p["id"]) < 64 for p in api.pods())  # that answer only


# -- pods_malformed and pods_empty -----------------------------------------------------------


def test_pods_malformed_default_is_an_object(api: Api) -> None:
    api.faults({"fault": "pods_malformed", "next": 1})
    r = api.get("/pods")
    assert r.status_code == 200
    assert isinstance(r.json(), dict)
    assert isinstance(api.get("/pods").json(), list)


def test_pods_malformed_html(api: Api) -> None:
    api.faults({"fault": "pods_malformed", "next": 1, "shape": "html"})
    r = api.get("/pods")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    with pytest.raises(json.JSONDecodeError):
        r.json()


def test_pods_malformed_junk_rows(api: Api) -> None:
    assert _post(api, _body(api)).status_code == 200
    api.faults({"fault": "pods_malformed", "next": 1, "shape": "junk_rows"})
    rows = api.get("/pods").json()
    assert isinstance(rows, list) and rows
    required = {"id": str, "status": str, "pod_name": str}
    assert all(
        not isinstance(row, dict) or any(not isinstance(row.get(k), t) for k, t in required.items()) for row in rows
    )


def test_pods_empty(api: Api) -> None:
    assert _post(api, _body(api)).status_code == 200
    api.faults({"fault": "pods_empty", "next": 1})
    r = api.get("/pods")
    assert r.status_code == 200 and r.json() == []
    assert len(api.pods()) == 2


# -- set_cookie and the request log ---------------------------------------------------------


def test_set_cookie_on_any_route_and_the_log_shows_it_sent_back(api: Api) -> None:
    api.faults({"fault": "set_cookie", "next": 1})
    first = api.get("/version")
    cookie = first.headers["Set-Cookie"]
    name, _, rest = cookie.partition("=")
    value = rest.split(";")[0]
    assert name == "lium_session" and value and "Path=/" in cookie
    api.get("/pods")  # httpx sends the cookie back, as a browser-like client would
    log = api.sim("GET", "requests?route=*")
    assert [(e["route"], e["cookie"]) for e in log] == [("version", False), ("pods", True)]
    assert value not in json.dumps(log)  # the log never holds the value


def test_set_cookie_name_option_on_rent(api: Api) -> None:
    api.faults({"fault": "set_cookie", "route": "rent", "next": 1, "name": "gw_affinity"})
    r = _post(api, _body(api))
    assert r.status_code == 200
    assert r.headers["Set-Cookie"].startswith("gw_affinity=")
    assert "Set-Cookie" not in api.get("/pods").headers  # the rule named rent only


def test_request_log_default_view_is_rent_only_with_route_and_cookie(api: Api) -> None:
    _post(api, _body(api))
    api.http.post(
        "/executors/cluster/rent",
        content=b"{}",
        headers={**api.headers(), "Cookie": "lium_session=abc"},
    )
    log = api.sim("GET", "requests")
    assert [e["route"] for e in log] == ["rent", "rent"]
    assert [e["cookie"] for e in log] == [False, True]
    assert {"idempotency_key", "body_sha256", "status", "replayed", "dropped"} <= set(log[0])
    offers = api.sim("GET", "requests?route=offers")
    assert offers and {e["route"] for e in offers} == {"offers"}
    bad = api.http.get("/_sim/requests", params={"route": "nope"})
    assert bad.status_code == 422


# -- trickle -------------------------------------------------------------------------------


def test_trickle_beats_a_read_timeout_and_commits(api: Api) -> None:
    api.faults({"fault": "trickle", "next": 1, "seconds": 2, "interval": 0.25})
    started = time.monotonic()
    with httpx.Client(base_url=api.base_url, timeout=httpx.Timeout(5.0, read=1.0)) as client:
        r = client.post("/executors/cluster/rent", content=_body(api), headers=api.headers())
    assert time.monotonic() - started >= 1.9  # no single read waited a second, yet it took the whole time
    assert r.status_code == 200
    assert len(r.json()["pod_ids"]) == 2
    assert len(api.sim("GET", "ledger")) == 1


def test_trickle_headers_come_at_once_and_an_overall_deadline_fires(api: Api) -> None:
    api.faults({"fault": "trickle", "next": 1, "seconds": 30, "interval": 0.1, "commit": False})
    started = time.monotonic()
    deadline = started + 1.0
    got = b""
    with api.http.stream("POST", "/executors/cluster/rent", content=_body(api), headers=api.headers()) as r:
        assert r.status_code == 200
        # The headers came long before the 30 s trickle ends (a generous margin: the machine may be busy).
        assert time.monotonic() - started < 15
        for chunk in r.iter_raw():
            got += chunk
            if time.monotonic() > deadline:
                break
    assert got and not got.strip()  # stopped at our deadline: only the leading whitespace has arrived
    assert api.sim("GET", "ledger") == [] and api.pods() == []


def test_trickle_without_commit_ends_in_a_failure_body(api: Api) -> None:
    api.faults({"fault": "trickle", "next": 1, "seconds": 0.5, "interval": 0.1, "commit": False})
    r = _post(api, _body(api))
    assert r.status_code == 200
    assert r.json()["success"] is False
    assert api.sim("GET", "ledger") == []


def test_trickle_on_another_route(api: Api) -> None:
    api.faults({"fault": "trickle", "route": "offers", "next": 1, "seconds": 0.6, "interval": 0.2})
    started = time.monotonic()
    r = api.get("/executors/infiniband-clusters")
    assert time.monotonic() - started >= 0.5
    assert r.status_code == 200 and isinstance(r.json(), list)


def test_trickle_does_not_hold_up_shutdown() -> None:
    rules = json.dumps({"rules": [{"fault": "trickle", "route": "version", "seconds": 120, "interval": 0.5}]})
    proc, url = start_simulator("--mode", "test", "--faults", rules)
    answering = threading.Event()
    reader = threading.Thread(target=_read_version, args=(url, answering))
    try:
        reader.start()
        assert answering.wait(timeout=30), "the trickle never started"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)  # well before the 120 s trickle ends (a generous margin: the machine may be busy)
    finally:
        stop_simulator(proc)
        reader.join(timeout=10)
    assert not reader.is_alive()


def _read_version(url: str, answering: threading.Event) -> None:
    """Read /version to its end; `answering` is set once its headers are in (the trickle is under way)."""
    with contextlib.suppress(httpx.HTTPError), httpx.stream("GET", f"{url}/version", timeout=200) as answer:
        answering.set()  # the server goes away mid-answer: the read ends in an HTTPError
        for _ in answer.iter_raw():
            pass


# -- delete_outage --------------------------------------------------------------------------


def _cluster(api: Api) -> str:
    r = _post(api, _body(api))
    assert r.status_code == 200, r.text
    return str(r.json()["cluster_id"])


def test_delete_outage_is_503_and_removes_nothing(api: Api) -> None:
    cluster_id = _cluster(api)
    api.faults({"fault": "delete_outage", "next": 1})
    r = api.http.delete(f"/clusters/{quote(cluster_id, safe='')}", headers=api.headers())
    assert r.status_code == 503
    assert r.json()["success"] is False and r.json()["status_code"] == 503
    assert {p["status"] for p in api.pods()} == {"PENDING"}
    assert api.http.delete(f"/clusters/{cluster_id}", headers=api.headers()).status_code == 200


def test_delete_outage_status_option(api: Api) -> None:
    cluster_id = _cluster(api)
    api.faults({"fault": "delete_outage", "next": 1, "status": 502})
    assert api.http.delete(f"/clusters/{cluster_id}", headers=api.headers()).status_code == 502
    assert len(api.pods()) == 2


def test_delete_outage_drop_option(api: Api) -> None:
    cluster_id = _cluster(api)
    api.faults({"fault": "delete_outage", "next": 1, "drop": True})
    with pytest.raises(httpx.TransportError):
        api.http.delete(f"/clusters/{cluster_id}", headers=api.headers())
    assert {p["status"] for p in api.pods()} == {"PENDING"}


# -- rule validation and reset ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        ({"fault": "pods_malformed", "shape": "xml"}, ["'shape'", "'xml'", "junk_rows"]),
        ({"fault": "trickle", "interval": 0}, ["'interval'", "> 0"]),
        ({"fault": "trickle", "interval": "fast"}, ["'interval'", "number"]),
        ({"fault": "trickle", "seconds": 1, "interval": 2}, ["'interval'", "'seconds'"]),
        ({"fault": "trickle", "seconds": -1}, ["'seconds'", "> 0"]),
        ({"fault": "html_2xx", "commit": "yes"}, ["'commit'", "true or false"]),
        ({"fault": "empty_2xx", "status": 500}, ["'status'", "2xx"]),
        ({"fault": "delete_outage", "status": 200}, ["'status'", "5xx"]),
        ({"fault": "delete_outage", "drop": 1}, ["'drop'", "true or false"]),
        ({"fault": "set_cookie", "name": "bad name;"}, ["'name'", "cookie name"]),
        ({"fault": "no_pod_ids", "route": "pods"}, ["no_pod_ids", "'rent'"]),
        ({"fault": "pods_empty", "colour": "red"}, ["'colour'", "pods_empty"]),
    ],
)
def test_bad_rule_options_are_refused_clearly(api: Api, rule: dict[str, object], words: list[str]) -> None:
    message = _rejected(api, rule)
    for word in words:
        assert word in message, message


def test_reset_clears_switches_faults_and_logs(api: Api) -> None:
    api.config(honour_idempotency_key=False)
    api.faults({"fault": "set_cookie"}, {"fault": "pods_empty"})
    api.get("/pods")
    api.http.post("/_sim/reset").raise_for_status()
    assert api.sim("GET", "config")["honour_idempotency_key"] is True
    assert api.sim("GET", "faults")["rules"] == []
    assert api.sim("GET", "requests?route=*") == []
    assert "rent_idempotency" in api.get("/version").json()["features"]
