"""A large account's pod listing: read row by row as it streams in, within bounded memory; a listing past
POD_LISTING_MAX_PODS is refused whole and the pod poller tells operators (not only the log)."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from rentals import upstream
from rentals.upstream.parse import Unparseable
from rentals.upstream.parse_pods import TooManyRows, pod_listing, pod_listing_stream

BASE_URL = "http://lium.invalid/api"


def pod(n: int) -> dict[str, Any]:
    """A pod row shaped as Lium's (and the simulator's) listing sends it, about 1.2 KB of JSON."""
    return {
        "id": f"7c9e6679-7425-40de-944b-{n:012d}",
        "pod_name": f"team-{n % 997}-job",
        "status": "RUNNING",
        "ssh_connect_cmd": f"ssh root@203.0.113.{n % 250 + 1} -p {20000 + n % 40000}",
        "ports_mapping": {"22": 20000 + n % 40000, "8888": 30000 + n % 30000},
        "created_at": "2026-12-01T10:00:00.000Z",
        "updated_at": "2026-12-01T10:00:08.000Z",
        "price": 15.92,
        "gpu_count": 8,
        "template": {
            "id": "tpl-1",
            "name": "PyTorch 2.4 + CUDA 12.4",
            "docker_image": "daturaai/pytorch",
            "volumes": [],
        },
        "executor": {
            "id": f"exec-{n:08d}",
            "machine_name": "8x NVIDIA H100 80GB HBM3",
            "gpu_count": 8,
            "price_per_gpu": None,
            "location": {"country": "US", "region": "Virginia"},
            "specs": {"gpu": {"count": 8, "details": [{"name": "H100", "memory": 81559}] * 2}, "ram": 2_000_000},
        },
        "cluster_id": f"cl-{n // 8:06d}",
        "cluster_node_index": n % 8,
        "cluster_overlay_ip": f"10.42.0.{n % 8 + 1}",
        "removal_scheduled_at": None,
        "jupyter_installation_status": None,
        "jupyter_url": None,
        "api_key_id": "key-main",
        "api_key_name": "main",
        "estimated_ready_seconds": None,
        "eta_basis": None,
        "phase": None,
    }


def listing_chunks(count: int, chunk_rows: int = 200) -> Iterator[bytes]:
    """The listing's body, made as it is sent: never whole in memory."""
    yield b"["
    for start in range(0, count, chunk_rows):
        rows = (json.dumps(pod(n)) for n in range(start, min(count, start + chunk_rows)))
        yield (("," if start else "") + ",".join(rows)).encode()
    yield b"]"


def client(handler: Any) -> upstream.LiumClient:
    auth = upstream.Auth(scheme="api_key", secret="k")
    return upstream.LiumClient(base_url=BASE_URL, auth=auth, http=httpx.Client(transport=httpx.MockTransport(handler)))


def test_the_streamed_parser_reads_what_the_whole_body_parser_reads_however_it_is_cut() -> None:
    body = b"".join(listing_chunks(30))
    whole = pod_listing(json.loads(body))
    for size in (1, 7, 4096):
        pieces = [body[i : i + size] for i in range(0, len(body), size)]
        assert pod_listing_stream(pieces, max_pods=100) == whole
    assert pod_listing_stream([b"[]"], max_pods=1) == []


@pytest.mark.parametrize(
    "body",
    [b'{"pods": []}', b"null", b"3", b"[1, 2]", b'[{"id": "p1"}]', b"[{", b"not json", b"", b"[] []"],
)
def test_a_listing_that_is_not_a_list_of_readable_rows_is_unreadable(body: bytes) -> None:
    with pytest.raises(Unparseable):
        pod_listing_stream([body], max_pods=10)


def test_a_listing_past_the_row_cap_is_refused_whole() -> None:
    with pytest.raises(TooManyRows, match="more than 5 pods"):
        pod_listing_stream(listing_chunks(6), max_pods=5)
    assert len(pod_listing_stream(listing_chunks(5), max_pods=5)) == 5


def listing_answer(count: int) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=listing_chunks(count), headers={"Content-Type": "application/json"})

    return handler


def test_a_20000_pod_listing_past_the_old_8_mb_cap_is_read(settings) -> None:
    settings.POD_LISTING_MAX_PODS = 100_000
    assert sum(len(chunk) for chunk in listing_chunks(20_000)) > 2 * 8 * 1024 * 1024

    rows = client(listing_answer(20_000)).list_pods()

    assert len(rows) == 20_000 and len({row.id for row in rows}) == 20_000
    assert rows[-1].cluster_id == f"cl-{19_999 // 8:06d}" and rows[-1].cluster_node_index == 19_999 % 8


def test_reading_a_listing_holds_only_its_typed_rows_not_the_body() -> None:
    """Bounded memory: what the read needs beyond the rows it returns is a chunk and a row, whatever the size
    (reading the whole body first held the body and its decoded JSON: about 5 times the rows)."""
    count = 5_000
    size = sum(len(chunk) for chunk in listing_chunks(count))
    tracemalloc.start()
    try:
        rows = client(listing_answer(count)).list_pods()
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(rows) == count and kept > size / 2  # the rows themselves are about the body's size
    assert peak - kept < size / 4, (peak, kept, size)


def test_a_listing_past_pod_listing_max_pods_is_refused_as_too_large(settings) -> None:
    settings.POD_LISTING_MAX_PODS = 100

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=listing_chunks(101))

    with pytest.raises(upstream.ListingTooLarge, match="POD_LISTING_MAX_PODS"):
        client(handler).list_pods()


def test_an_error_answer_to_the_listing_is_still_the_error_tree() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            429, json={"error": {"code": "rate_limited", "message": "slow"}}, headers={"Retry-After": "3"}
        )

    with pytest.raises(upstream.RateLimited) as raised:
        client(handler).list_pods()
    assert raised.value.retry_after == 3
