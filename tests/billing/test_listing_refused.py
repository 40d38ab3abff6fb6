"""A pod listing the dashboard refuses (too large, unreadable) stops tracking: operators hear of it, once."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from django.core import mail

from billing.models import OperatorNotice
from billing.operator_notices import notices_send
from rentals import upstream
from rentals.tracking.members import credential_pods_sync


@pytest.fixture
def lium_pods(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Every credential's `GET /pods` answers `count` rows (or `body` when set)."""
    state: dict[str, Any] = {"count": 0, "body": None}
    real_client_for = upstream.client_for

    def handle(request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/pods")
        if state["body"] is not None:
            return httpx.Response(200, content=state["body"])
        rows = [{"id": f"p{n}", "status": "RUNNING"} for n in range(state["count"])]
        return httpx.Response(200, json=rows)

    def client_for(credential, *, http=None):  # type: ignore[no-untyped-def]
        return real_client_for(credential, http=http or httpx.Client(transport=httpx.MockTransport(handle)))

    monkeypatch.setattr(upstream, "client_for", client_for)
    return state


def test_a_listing_past_the_cap_opens_one_notice_mails_operators_and_shows_on_ops(
    settings, client_for, olga, acme, credential, make_ready_rental, lium_pods
) -> None:
    settings.POD_LISTING_MAX_PODS = 3
    make_ready_rental(acme)
    lium_pods["count"] = 4

    credential_pods_sync(credential_id=credential.pk, force=True)
    credential_pods_sync(credential_id=credential.pk, force=True)  # still refused: the same notice
    notices_send()

    [notice] = OperatorNotice.objects.all()
    assert notice.kind == "pods.listing_refused" and notice.resolved_at is None
    assert "more than 3 pods" in notice.text and "POD_LISTING_MAX_PODS" in notice.text
    assert [message.to for message in mail.outbox] == [[olga.email]]
    page = client_for(olga).get("/ops/").content.decode()
    assert 'data-kind="pods.listing_refused"' in page and "refused" in page


def test_a_listing_that_reads_again_closes_the_notice(settings, acme, credential, make_ready_rental, lium_pods) -> None:
    make_ready_rental(acme)
    lium_pods["body"] = b'{"pods": "not a list"}'
    credential_pods_sync(credential_id=credential.pk, force=True)
    assert OperatorNotice.objects.filter(resolved_at__isnull=True).count() == 1

    lium_pods["body"] = None
    credential_pods_sync(credential_id=credential.pk, force=True)
    assert OperatorNotice.objects.filter(resolved_at__isnull=True).count() == 0


def test_an_unreachable_upstream_is_no_refusal(acme, credential, make_ready_rental, monkeypatch) -> None:
    make_ready_rental(acme)

    def down(credential, *, http=None):  # type: ignore[no-untyped-def]
        raise upstream.UpstreamUnavailable("maintenance")

    monkeypatch.setattr(upstream, "client_for", down)
    credential_pods_sync(credential_id=credential.pk, force=True)
    assert OperatorNotice.objects.count() == 0
