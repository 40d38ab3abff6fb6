"""`rental.removal_soon`: an hour before a scheduled removal, once per rental and scheduled time."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from notifications.models import Event
from notifications.services import endpoint_create, removal_soon_emit
from rentals.models import Rental

pytestmark = pytest.mark.django_db


def test_removal_soon_is_emitted_once_per_rental_and_scheduled_time(alice, make_rental) -> None:
    endpoint_create(
        customer=alice.memberships.get().customer, url="http://127.0.0.1:9/h", events=["*"], created_by=alice
    )
    soon = make_rental(user=alice, status="ready")
    later = make_rental(user=alice, status="ready", pod_name="later")
    gone = make_rental(user=alice, status="terminated", pod_name="gone")
    now = timezone.now()
    Rental.objects.filter(pk__in=[soon.pk, gone.pk]).update(removal_scheduled_at=now + timedelta(minutes=30))
    Rental.objects.filter(pk=later.pk).update(removal_scheduled_at=now + timedelta(hours=2))

    assert removal_soon_emit() == 1
    assert removal_soon_emit() == 0  # the beat task runs every minute: still once
    event = Event.objects.get()
    body = json.loads(event.body)
    assert body["type"] == "rental.removal_soon" and body["data"]["rental"]["id"] == str(soon.public_id)
    assert "removal_scheduled_at" in body["data"]

    # Extended to a new time that comes within the hour again: one more warning for the new time.
    Rental.objects.filter(pk=soon.pk).update(removal_scheduled_at=now + timedelta(minutes=50))
    assert removal_soon_emit() == 1
    assert removal_soon_emit(now=now + timedelta(hours=1, minutes=30)) == 1  # `later`, when its hour comes
    assert Event.objects.count() == 3
