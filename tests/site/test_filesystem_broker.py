"""The embedded broker never hands a worker a half-written message (which stopped every worker under load).

Kombu's own file-system transport does (https://github.com/celery/kombu/issues/1551): the first test shows it, so
that the day Kombu fixes it, the test says `common/filesystem_broker.py` can go.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from kombu import Exchange, Queue

from dashboard.celery import app

pytestmark = pytest.mark.skipif(
    not settings.CELERY_BROKER_URL.startswith("filesystem://"), reason="the embedded file-system broker only"
)


class Stall:
    """A header value whose serialisation waits until released: the publisher is then mid-write."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __json__(self) -> str:
        self.entered.set()
        self.release.wait(timeout=10)
        return "stalled"


@pytest.fixture
def queue_name() -> Iterator[str]:
    # A queue of its own in the run's broker folders: no worker of another test consumes it.
    name = f"test-broker-{uuid.uuid4().hex[:8]}"
    yield name
    with connection() as conn:
        conn.SimpleQueue(name).clear()


OURS = "common.filesystem_broker:Transport"
KOMBUS = "kombu.transport.filesystem:Transport"


def connection(transport: str = OURS) -> Any:
    """Return a connection to the run's broker folders (typed loosely: the stubs lack SimpleQueue and Producer)."""
    return app.connection_for_write(transport=transport)


def publish(name: str, body: str, transport: str = OURS, **headers: Any) -> None:
    with connection(transport) as conn:
        queue = Queue(name, Exchange(name), name)
        conn.Producer().publish(body, exchange=queue.exchange, routing_key=name, declare=[queue], headers=headers)


@pytest.mark.parametrize("transport", [OURS, KOMBUS])
def test_a_worker_looking_while_a_message_is_written_finds_nothing_then_the_whole_message(
    queue_name: str, transport: str
) -> None:
    publish(queue_name, "declared", transport)  # the queue exists, as it does once the dashboard has run
    with connection(transport) as conn:
        consumer = conn.SimpleQueue(queue_name)
        consumer.get(timeout=5).ack()
        stall = Stall()
        publisher = threading.Thread(target=publish, args=(queue_name, "rental 1", transport), kwargs={"stall": stall})
        publisher.start()
        assert stall.entered.wait(timeout=5)
        try:
            consumer.get_nowait()
            looked = "a message"
        except consumer.Empty:
            looked = "nothing"
        except ValueError:  # the decoding error that stops a worker
            looked = "an unreadable message"
        finally:
            stall.release.set()
            publisher.join(timeout=10)
        assert looked == ("nothing" if transport == OURS else "an unreadable message")
        if transport == OURS:
            message = consumer.get(timeout=5)
            message.ack()
            assert (message.payload, message.headers["stall"]) == ("rental 1", "stalled")


def test_each_message_is_taken_by_one_worker_once(queue_name: str) -> None:
    for n in range(40):
        publish(queue_name, f"rental {n}")
    taken: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        with connection() as conn:  # each worker its own connection
            consumer = conn.SimpleQueue(queue_name)
            while True:
                try:
                    message = consumer.get_nowait()
                except consumer.Empty:
                    return
                message.ack()
                with lock:
                    taken.append(message.payload)

    workers = [threading.Thread(target=worker) for _ in range(4)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(timeout=20)
    assert sorted(taken) == sorted(f"rental {n}" for n in range(40))
