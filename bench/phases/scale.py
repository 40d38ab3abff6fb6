"""Phases 3 and 4: page cost and support search as the rentals grow to each size asked for."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any
from urllib.parse import quote

import httpx
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.template.exceptions import TemplateDoesNotExist
from django.template.loader import get_template
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import NoReverseMatch, reverse

from bench.bulk import bench_tenants, bulk_rentals, search_samples
from bench.context import People, Run
from bench.figures import parse_sizes, pct, r
from bench.generated import generate_rentals, indexes_built_after, settle
from rentals.models import Rental
from rentals.tasks import sqlite_analyze
from scripts.harness import say

INSERT_CHUNK = 100_000


def measure_at_scale(run: Run, people: People) -> None:
    """Grow the rentals to each size asked for; at each, measure the pages and the support search."""
    page_sizes, search_sizes = scale_sizes(run)
    tenants = bench_tenants(people.credential) if page_sizes or search_sizes else []
    in_process = {"user": Client(), "staff": Client()}
    in_process["user"].force_login(people.alice)
    in_process["staff"].force_login(User.objects.get(username="bench-admin"))
    first_id = (Rental.objects.order_by("-id").values_list("id", flat=True).first() or 0) + 1000
    next_id = first_id
    for size in sorted(set(page_sizes) | set(search_sizes)):
        next_id = grow_to(size, next_id=next_id, people=people, tenants=tenants)
        if size in page_sizes:
            say(f"\n[3] page cost at {size} rentals ({run.args.fabrics} x {run.args.nodes_per_fabric} fabrics)")
            run.result["pages"]["sizes"][str(size)] = measure_pages(run, people, in_process)
        if size in search_sizes:
            say(f"\n[4] support search at {size} rentals (PostgreSQL)")
            samples = search_samples(first=first_id + 1, last=next_id)
            figures = measure_search(run.args.search_samples, people.staff_http, samples)
            run.result["search"]["sizes"][str(size)] = figures
            run.summary.append((f"search worst p95 at {size} (ms)", str(figures["worst_p95_ms"])))
    if page_sizes:
        summarise_pages(run, page_sizes)


def scale_sizes(run: Run) -> tuple[list[int], list[int]]:
    """Return the sizes for the pages and for the search, and record why a phase asked for is skipped."""
    present = ops_present()
    run.result["ops"] = "present" if present is True else f"skipped: {present}"
    page_sizes = parse_sizes(run.args.page_rows) if "pages" in run.phases else []
    pg = connection.vendor == "postgresql"
    search_sizes = parse_sizes(run.args.search_rows) if "search" in run.phases and pg else []
    if "search" in run.phases and not pg:
        run.result["search"] = {
            "skipped": "support search is measured on PostgreSQL only; DATABASE_URL is not "
            "PostgreSQL (run with DATABASE_URL=postgres://...)"
        }
    elif "search" in run.phases and present is not True:
        run.result["search"] = {"skipped": f"ops is not installed ({present})"}
        search_sizes = []
    if page_sizes:
        run.result["pages"] = {"samples": run.args.page_samples, "sizes": {}}
    if search_sizes:
        run.result["search"] = {"samples_per_kind": run.args.search_samples, "sizes": {}}
    return page_sizes, search_sizes


def grow_to(size: int, *, next_id: int, people: People, tenants: list[tuple[int, int, str]]) -> int:
    """Insert historical rentals until there are `size` and settle the tables; return the last inserted id (the
    next chunk starts after it).

    PostgreSQL generates the rows in the server (`bench.generated`), then vacuums and analyzes once; SQLite gets
    rows built in Python (`bench.bulk`), then the hourly `sqlite_analyze`.
    """
    have = Rental.objects.count()
    missing = size - have
    if missing <= 0:
        return next_id
    say(f"\n    inserting {missing} rentals (to {size}) ...")
    pg = connection.vendor == "postgresql"
    t0 = time.monotonic()
    with indexes_built_after(connection) if pg else nullcontext():
        for offset in range(0, missing, INSERT_CHUNK):
            chunk = min(INSERT_CHUNK, missing - offset)
            (generate_rentals if pg else bulk_rentals)(
                start=next_id,
                count=chunk,
                customer=people.customer,
                credential=people.credential,
                user=people.alice,
                tenants=tenants,
            )
            next_id += chunk
            say(f"    {offset + chunk} inserted ({time.monotonic() - t0:.1f} s)")
    if pg:
        settle(connection)
        say(f"    indexes built, tables vacuumed and analyzed ({time.monotonic() - t0:.1f} s)")
    say(f"    {Rental.objects.count()} rentals now ({time.monotonic() - t0:.1f} s)")
    # The hourly beat task a running dashboard has done by the time it holds this many rentals.
    if sqlite_analyze():
        say("    SQLite statistics refreshed (rentals.tasks.sqlite_analyze, hourly in beat)")
    return next_id


def measure_pages(run: Run, people: People, in_process: dict[str, Client]) -> dict[str, Any]:
    """Time each page through gunicorn, and a cached page with its cache empty; count its queries in-process;
    return the figures per page."""
    # Page 100 of my rentals: the keyset cursor after the 2,475th newest row, as the "Older" links would reach it.
    deep = Rental.objects.filter(customer=people.customer).order_by("-created_at", "-id")[2474]
    cursor = quote(f"{deep.created_at.isoformat()}_{deep.pk}")
    pages = {
        "fabric_list": ("user", "/fabrics/"),
        "rental_list": ("user", "/rentals/"),
        "rental_list_page_100": ("user", f"/rentals/?before={cursor}"),
    }
    if run.result["ops"] == "present":
        pages["ops_overview"] = ("staff", "/ops/")
    figures: dict[str, Any] = {}
    for name, (who, path) in pages.items():
        http = people.user_http if who == "user" else people.staff_http
        # The first request a web process answers for a page also loads its code and templates (and the fabric
        # list fetches the listing it then caches): timed apart as `first_ms`, then one more warm-up per process.
        p0 = time.perf_counter()
        http.get(path)
        first_ms = (time.perf_counter() - p0) * 1000
        for _ in range(run.args.web_workers):
            http.get(path)
        times = []
        for _ in range(run.args.page_samples):
            p0 = time.perf_counter()
            response = http.get(path)
            times.append((time.perf_counter() - p0) * 1000)
            if response.status_code != 200:
                raise RuntimeError(f"{path} answered {response.status_code}")
        with CaptureQueriesContext(connection) as queries:
            in_process[who].get(path)
        figures[name] = {
            "median_ms": r(statistics.median(times)),
            "p95_ms": r(pct(times, 95) or 0.0),
            "queries": len(queries),
            "first_ms": r(first_ms),
        }
        miss = ""
        forget = cache_forgetters(people).get(name)
        if forget is not None:
            misses = cache_misses(forget, http if shared_cache() else in_process[who], path)
            figures[name] |= {"miss_ms": r(statistics.median(misses)), "miss_max_ms": r(max(misses))}
            miss = f"   miss {statistics.median(misses):6.1f} ms (max {max(misses):.1f})"
        p95 = figures[name]["p95_ms"]
        say(
            f"    {name:22s} median {statistics.median(times):8.1f} ms   p95 {p95:8.1f} ms{miss}   "
            f"queries {len(queries)}"
        )
    return figures


MISS_SAMPLES = 5


def cache_forgetters(people: People) -> dict[str, Callable[[], None]]:
    """Return, per cached page, what empties its cache: the fabric listing, the overview's figures."""
    from django.core.cache import cache

    def fabric_list_forget() -> None:
        base = f"offers:{people.credential.pk}"  # rentals.offers keeps the listing, its stamp and taken nodes here
        cache.delete_many([base, f"{base}:stamp", f"{base}:taken"])

    forgetters = {"fabric_list": fabric_list_forget}
    if "ops" in settings.INSTALLED_APPS:
        from ops.overview import OVERVIEW_CACHE_KEY

        def overview_forget() -> None:
            cache.delete(OVERVIEW_CACHE_KEY)

        forgetters["ops_overview"] = overview_forget
    return forgetters


def shared_cache() -> bool:
    """Whether gunicorn's workers and this process share the cache (Redis), so this process can empty theirs."""
    return "redis" in settings.CACHES["default"]["BACKEND"].lower()


def cache_misses(forget: Callable[[], None], client: Any, path: str) -> list[float]:
    """Time `path` right after its cache was emptied, `MISS_SAMPLES` times: through gunicorn when the cache is
    shared, else in this process (each gunicorn worker's local cache is out of reach)."""
    times = []
    for _ in range(MISS_SAMPLES):
        forget()
        p0 = time.perf_counter()
        response = client.get(path)
        times.append((time.perf_counter() - p0) * 1000)
        if response.status_code != 200:
            raise RuntimeError(f"{path} answered {response.status_code} on a cache miss")
    return times


def measure_search(samples_per_kind: int, staff_http: httpx.Client, samples: dict[str, list[str]]) -> dict[str, Any]:
    """Time `GET /ops/search/?q=` for every identifier kind; return the figures per kind and the worst p95."""
    kinds = {k: v for k, v in samples.items() if v}
    # One customer holding most rentals, one of 400, a prefix of ten (and of all 400: at most 20 read).
    kinds["customer"] = ["Bench Res", "Bench Tenant 123", "Bench Tenant 01", "Bench Tenant"]
    # The creator of most rentals; a tenant's user by name and by e-mail in another case.
    kinds["user"] = ["bench-alice", "bench-tenant-042", "ops+042@tenant042.invalid"]
    kinds["overlay IP"] = ["10.42.0.1", "10.42.0.2"]
    # The first search a web process answers also loads its code and templates: timed apart (as the
    # pages' first_ms), then two more warm-ups so that the samples measure the search itself.
    p0 = time.perf_counter()
    staff_http.get("/ops/search/", params={"q": "warm-up"})
    first_ms = (time.perf_counter() - p0) * 1000
    for _ in range(2):
        staff_http.get("/ops/search/", params={"q": "warm-up"})
    per_kind: dict[str, Any] = {}
    for kind, values in kinds.items():
        step = max(1, len(values) // samples_per_kind)
        chosen = (values[::step] * samples_per_kind)[:samples_per_kind]
        times = []
        for value in chosen:
            p0 = time.perf_counter()
            response = staff_http.get("/ops/search/", params={"q": value})
            times.append((time.perf_counter() - p0) * 1000)
            if response.status_code not in (200, 302):
                raise RuntimeError(f"search {value!r} answered {response.status_code}")
        p95 = pct(times, 95) or 0.0
        per_kind[kind] = {"median_ms": r(statistics.median(times)), "p95_ms": r(p95)}
        say(f"    {kind:16s} median {statistics.median(times):7.1f} ms   p95 {p95:7.1f} ms")
    worst = max(v["p95_ms"] for v in per_kind.values())
    return {"kinds": per_kind, "worst_p95_ms": worst, "first_ms": r(first_ms)}


def summarise_pages(run: Run, page_sizes: list[int]) -> None:
    """Record whether every page's query count holds across sizes, and add the pages to the summary."""
    sizes = run.result["pages"]["sizes"]
    run.result["pages"]["queries_constant"] = all(
        len({sizes[str(s)][page]["queries"] for s in page_sizes}) == 1 for page in sizes[str(page_sizes[0])]
    )
    for s in page_sizes:
        line = ", ".join(
            f"{name} {v['median_ms']}/{v['p95_ms']} ms/{v['queries']}q"
            + (f" (miss {v['miss_ms']} ms)" if "miss_ms" in v else "")
            for name, v in sizes[str(s)].items()
        )
        run.summary.append((f"pages at {s} rows (median/p95)", line))


def ops_present() -> bool | str:
    """True when the operations pages exist (app installed, URLs and templates in place), else why not."""
    if "ops" not in settings.INSTALLED_APPS:
        return "the ops app is not in INSTALLED_APPS"
    try:
        reverse("ops:overview")
        reverse("ops:search")
    except NoReverseMatch:
        return "the ops URLs (ops_overview, ops_search) are not routed"
    try:
        get_template("ops/overview.html")
    except TemplateDoesNotExist:
        return "templates/ops/overview.html does not exist"
    return True
