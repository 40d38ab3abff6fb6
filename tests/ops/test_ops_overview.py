"""The overview's attention table as an operator reads it: each row links to the rental's staff page and says
whose it is, its state, why it is listed and for how long."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from rentals.models import Rental
from rentals.states import RentalStatus

pytestmark = pytest.mark.django_db


def attention_cells(html: str, pod_name: str) -> list[str]:
    """Return the text of each cell of the attention row that names `pod_name` (the link's href first)."""
    table = html.split('data-testid="attention"', 1)[1].split("</table>", 1)[0]
    [row] = [row for row in table.split("<tr>") if f">{pod_name}<" in row]
    href = re.search(r'href="([^"]+)"', row)
    assert href is not None
    cells = [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td>(.*?)</td>", row, flags=re.S)]
    cells = [cell.replace("\xa0", " ") for cell in cells]  # `timesince` keeps a number and its unit together
    return [href.group(1), *cells]


def test_an_attention_row_links_to_the_rental_and_says_why_and_for_how_long(make_rental, globex, sam, client_for):
    unknown = make_rental(customer=globex, status=RentalStatus.UNKNOWN, error_code="timeout")
    Rental.objects.filter(pk=unknown.pk).update(updated_at=timezone.now() - timedelta(hours=2, minutes=5))
    html = client_for(sam).get("/ops/").content.decode()
    assert attention_cells(html, unknown.pod_name) == [
        f"/ops/rentals/{unknown.public_id}/",
        unknown.pod_name,
        "Globex",
        "Outcome unknown",
        "Outcome unknown: reconcile · timeout",
        "2 hours, 5 minutes",
    ]
    assert 'class="badge s-unknown">Outcome unknown<' in html


def test_attention_rows_are_oldest_problem_first_and_escaped(make_rental, acme, sam, client_for):
    old = make_rental(status=RentalStatus.DEGRADED)
    new = make_rental(status=RentalStatus.UNKNOWN, pod_name="new-one")
    now = timezone.now()
    # A name the order form refuses, as a row could hold from elsewhere: the page must escape it.
    Rental.objects.filter(pk=old.pk).update(pod_name="old-<b>", updated_at=now - timedelta(days=3))
    Rental.objects.filter(pk=new.pk).update(updated_at=now - timedelta(minutes=3))
    html = client_for(sam).get("/ops/").content.decode()
    assert "old-<b>" not in html and html.index("old-&lt;b&gt;") < html.index(">new-one<")
    assert attention_cells(html, "old-&lt;b&gt;")[-1] == "3 days"
    assert attention_cells(html, "new-one")[-1] == "3 minutes"


@pytest.fixture
def waiting_rent_message(settings):  # type: ignore[no-untyped-def]
    """One message waiting in the broker's `rent` queue (Redis only), removed after the test."""
    if not settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
        pytest.skip("the queue depth is read from a Redis broker only")
    import redis

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    marker = '{"test": "waiting rent message"}'
    client.lpush(settings.RENT_QUEUE, marker)
    yield
    client.lrem(settings.RENT_QUEUE, 0, marker)
    client.close()


def test_the_queue_depth_counts_the_rent_queue(waiting_rent_message, sam, client_for) -> None:
    """Rent calls wait in their own queue (not Celery's default `celery`): a backlog there is what matters."""
    from ops.overview import worker_health

    worker = worker_health(now=timezone.now())
    assert worker["queue_depth"] >= 1
    html = client_for(sam).get("/ops/").content.decode()
    assert re.search(r"\b[1-9]\d* waiting", html)
