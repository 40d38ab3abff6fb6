"""The polled progress fragment backs off while nothing changes and stops once the rental is final."""

from __future__ import annotations

import re
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.test import Client

from accounts.models import Membership
from billing.models import CustomerQuota
from rentals.models import Rental
from rentals.orders.order import RentOrder
from rentals.services import rental_submit
from rentals.web import progress
from tests.conftest import SSH_KEY
from tests.doubles import WallClock
from tests.matching import must_search
from tests.web.polls import logged_in, poller_url, tags

pytestmark = pytest.mark.django_db


def delay(html: str) -> float | None:
    match = re.search(r'hx-trigger="load delay:([0-9.]+)s"', html)
    return float(match.group(1)) if match else None


def test_an_unchanged_rental_gets_nothing_new_and_the_poller_backs_off(
    rental, alice, client_for, django_assert_num_queries
) -> None:
    client = client_for(alice)
    page = client.get(f"/rentals/{rental.public_id}/").content.decode()
    assert delay(page) == 2.0
    with django_assert_num_queries(1):  # with the page's token: the rental, and that the session still exists
        answer = client.get(poller_url(page))
    assert answer.status_code == 204 and answer.content == b"", "nothing is rendered"
    # On a 204 the page's script asks again 1.5 times later each time, up to 30 s.
    assert 'src="/static/js/poll.js"' in page
    script = (Path(settings.BASE_DIR) / "static/js/poll.js").read_text()
    assert "status !== 204" in script and "* 1.5, 30)" in script


def test_a_settled_rental_polls_slowly(rental, alice, client_for) -> None:
    Rental.objects.filter(pk=rental.pk).update(status="ready", version=rental.version + 1)
    assert delay(client_for(alice).get(f"/rentals/{rental.public_id}/").content.decode()) == 15.0


def test_a_changed_rental_sends_the_new_progress_and_polls_fast_again(rental, alice, client_for) -> None:
    client = client_for(alice)
    page = client.get(f"/rentals/{rental.public_id}/").content.decode()
    Rental.objects.filter(pk=rental.pk).update(status="sending", version=rental.version + 1)
    answer = client.get(poller_url(page))
    html = answer.content.decode()
    assert 'hx-swap-oob="true"' in html and "Attempts" in html and "Sending" in html
    assert "sessionid" not in answer.cookies and "csrftoken" not in answer.cookies, "a poll writes no cookie"
    assert delay(html) == 2.0
    assert f"?v={rental.version + 1}&" in poller_url(html), "the next poll asks about the version it now shows"


def test_a_change_is_rendered_once_for_everyone_polling_it(rental, alice, carol, django_assert_num_queries) -> None:
    browsers = [logged_in(alice), logged_in(carol)]
    urls = [poller_url(browser.get(f"/rentals/{rental.public_id}/").content.decode()) for browser in browsers]
    Rental.objects.filter(pk=rental.pk).update(status="sending", version=rental.version + 1)
    first = browsers[0].get(urls[0]).content.decode()
    # The token stands in for the session, user and permission lookups; the section is kept per version.
    with django_assert_num_queries(1):  # the rental, and that the session still exists
        second = browsers[1].get(urls[1]).content.decode()
    assert "Sending" in first and "Sending" in second
    assert first.split('<section id="progress"')[1] == second.split('<section id="progress"')[1]


def test_the_polled_section_holds_no_csrf_field_and_its_form_takes_the_pages_token(rental, alice) -> None:
    browser = logged_in(alice, enforce_csrf_checks=True)
    page = browser.get(f"/rentals/{rental.public_id}/").content.decode()
    Rental.objects.filter(pk=rental.pk).update(version=rental.version + 1)
    html = browser.get(poller_url(page)).content.decode()
    assert "Cancel order" in html and "csrfmiddlewaretoken" not in html, "a poll renders no token (sets no cookie)"
    cancel = next(form for form in tags(html, "form") if "/cancel/" in form["action"])
    assert browser.post(cancel["action"]).status_code == 403, "the form alone carries no token"
    # What a browser submits with the polled form: the page's field that names it (outside the shared section).
    owned = [field for field in tags(page, "input") if "id" in cancel and field.get("form") == cancel["id"]]
    assert [field["name"] for field in owned] == ["csrfmiddlewaretoken"], "the page holds the form's token"
    token = owned[0]
    assert browser.post(cancel["action"], {token["name"]: token["value"]}).status_code == 302
    rental.refresh_from_db()
    assert rental.status == "cancelled"


def test_support_gets_no_action_buttons_even_after_a_member_polled_the_same_version(rental, alice, sam) -> None:
    alice_browser, sam_browser = logged_in(alice), logged_in(sam)
    alice_url = poller_url(alice_browser.get(f"/rentals/{rental.public_id}/").content.decode())
    sam_url = poller_url(sam_browser.get(f"/rentals/{rental.public_id}/").content.decode())
    Rental.objects.filter(pk=rental.pk).update(version=rental.version + 1)
    assert "Cancel order" in alice_browser.get(alice_url).content.decode()
    assert "Cancel order" not in sam_browser.get(sam_url).content.decode()


def test_a_logged_out_session_gets_no_progress_with_its_old_poll_url(rental, alice) -> None:
    browser = logged_in(alice)
    url = poller_url(browser.get(f"/rentals/{rental.public_id}/").content.decode())
    cookie = browser.cookies["sessionid"].value
    browser.post("/accounts/logout/")
    Rental.objects.filter(pk=rental.pk).update(status="sending", version=rental.version + 1)
    stolen = Client()
    stolen.cookies["sessionid"] = cookie  # someone who kept the old cookie and the poll URL
    answer = stolen.get(url)
    assert answer.status_code == 302 and "/accounts/login/" in answer["Location"]


def test_a_removed_member_stops_seeing_progress_when_the_token_expires(rental, alice, monkeypatch) -> None:
    browser = logged_in(alice)
    url = poller_url(browser.get(f"/rentals/{rental.public_id}/").content.decode())
    Membership.objects.filter(user=alice).delete()
    Rental.objects.filter(pk=rental.pk).update(status="sending", version=rental.version + 1)
    assert browser.get(url).status_code == 200, "within the token's life the token stands in for the check"
    # Only the signer's clock is moved (the token's age), not the whole process's time.time().
    monkeypatch.setattr("django.core.signing.time", WallClock(time.time() + progress.POLL_TOKEN_SECONDS + 1))
    assert browser.get(url).status_code == 404, "after it, the full check applies: no longer a member"


def test_a_poll_url_only_works_for_rentals_the_user_may_see(rental, alice, bob, globex) -> None:
    bobs = rental_submit(
        user=bob,
        customer=globex,
        order=RentOrder(fabric_id="f", executor_ids=["n3", "n4"], pod_name="bobs-job", public_keys=[SSH_KEY]),
        customer_ref="globex",
    )
    browser = logged_in(alice)
    url = poller_url(browser.get(f"/rentals/{rental.public_id}/").content.decode())
    assert browser.get(url.replace(str(rental.public_id), str(bobs.public_id))).status_code == 404


def test_someone_elses_poll_url_shows_bob_nothing(rental, alice, bob, client_for) -> None:
    page = client_for(alice).get(f"/rentals/{rental.public_id}/").content.decode()
    url = poller_url(page)
    client_for(bob)  # the same client, now logged in as bob
    assert client_for(bob).get(url).status_code == 404, "alice's poll URL does not let bob poll her rental"


def test_a_forged_token_gets_the_full_checked_path(rental, bob, client_for) -> None:
    url = f"/rentals/{rental.public_id}/progress/?v={rental.version}&t=forged"
    assert client_for(bob).get(url).status_code == 404


@pytest.mark.parametrize("query", ["", "?v=x", "?v=1&d=soon", "?v=99999"])
def test_a_poll_that_cannot_say_what_it_shows_gets_the_section(rental, alice, client_for, query) -> None:
    answer = client_for(alice).get(f"/rentals/{rental.public_id}/progress/{query}")
    assert answer.status_code == 200 and 'hx-swap-oob="true"' in answer.content.decode()


def test_a_final_rental_stops_polling(rental, alice, client_for) -> None:
    Rental.objects.filter(pk=rental.pk).update(status="refused", attempt_count=1, version=rental.version + 1)
    html = client_for(alice).get(f"/rentals/{rental.public_id}/").content.decode()
    assert 'id="poller"' in html and delay(html) is None
    assert "Lium refused the order" in html


def test_support_sees_the_rental_without_action_buttons(rental, sam, client_for) -> None:
    html = client_for(sam).get(f"/rentals/{rental.public_id}/").content.decode()
    assert "Cancel order" not in html
    assert client_for(sam).post(f"/rentals/{rental.public_id}/cancel/").status_code == 403
    rental.refresh_from_db()
    assert rental.status == "queued"


def test_alice_can_cancel_a_queued_order(rental, alice, client_for) -> None:
    client = client_for(alice)
    assert "Cancel order" in client.get(f"/rentals/{rental.public_id}/").content.decode()
    client.post(f"/rentals/{rental.public_id}/cancel/")
    rental.refresh_from_db()
    assert rental.status == "cancelled"


def test_my_rentals_refreshes_in_flight_rows_until_none_is_left(rental, alice, client_for) -> None:
    client = client_for(alice)
    page = client.get("/rentals/").content.decode()
    assert 'hx-trigger="every 5s"' in page and "fragment=rows" in page
    rows = client.get("/rentals/", {"fragment": "rows"}).content.decode()
    assert rows.lstrip().startswith('<tbody id="rows"') and "job" in rows
    Rental.objects.filter(pk=rental.pk).update(status="refused")
    rows = client.get("/rentals/", {"fragment": "rows"}).content.decode()
    assert "hx-trigger" not in rows and "Refused" in rows, "nothing in flight: the list stops polling"


def test_my_rentals_shows_what_is_left_of_the_quotas(rental, alice, acme, client_for) -> None:
    CustomerQuota.objects.create(customer=acme, max_hourly_usd=100)
    html = client_for(alice).get("/rentals/").content.decode()
    assert "Acme Research's quotas:" in html
    assert f"${100 - rental.price_per_hour:.2f} USD per hour left of $100.00" in html


def test_my_rentals_pages_with_older_links_without_gaps_or_repeats(alice, acme, client_for, monkeypatch) -> None:
    monkeypatch.setattr("rentals.enqueue._enqueue", lambda *a, **k: None)
    for number in range(30):
        order = RentOrder(fabric_id="f", executor_ids=["n1", "n2"], pod_name=f"job-{number:02d}", public_keys=[SSH_KEY])
        rental_submit(user=alice, customer=acme, order=order, customer_ref="acme")
    client = client_for(alice)
    first = client.get("/rentals/").content.decode()
    older = must_search(r'href="\?before=([^&"]+)', first).group(1)
    second = client.get(f"/rentals/?before={older}").content.decode()
    names = re.findall(r">(job-\d\d)</a>", first) + re.findall(r">(job-\d\d)</a>", second)
    assert names == [f"job-{n:02d}" for n in range(29, -1, -1)], "newest first, 25 then 5, each once"
    assert 'href="?before=' not in second and "Newest" in second, "no Older link on the last page"
    assert client.get("/rentals/?before=garbled").status_code == 200, "a bad cursor shows the first page"


@pytest.mark.parametrize(
    "polled", ["progress", "rental list", "ops panel"], ids=["progress", "rental-list", "ops-panel"]
)
def test_a_poll_after_sign_out_sends_the_whole_page_to_sign_in_not_the_form_into_the_page(rental, polled) -> None:
    # htmx follows a 302 itself and would swap the whole login page into the polled part of the page.
    page = {"progress": f"/rentals/{rental.public_id}/", "rental list": "/rentals/", "ops panel": "/ops/"}[polled]
    fragment = {
        "progress": f"/rentals/{rental.public_id}/progress/?v=1",
        "rental list": "/rentals/?page=1",
        "ops panel": "/ops/panel/",
    }[polled]
    answer = Client().get(fragment, HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL=f"http://testserver{page}")
    assert answer.status_code == 200 and answer.content == b""
    assert answer["HX-Redirect"] == f"/accounts/login/?next={quote(page)}"


def test_a_poll_after_sign_out_never_redirects_sign_in_to_another_site(rental) -> None:
    answer = Client().get(
        f"/rentals/{rental.public_id}/progress/?v=1",
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL="https://evil.example/phish",
    )
    assert answer["HX-Redirect"] == "/accounts/login/"
