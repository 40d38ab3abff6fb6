"""Safe by default: in production only https URLs on public addresses may register (checked after DNS)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from notifications.addresses import UnsafeUrl, url_check
from notifications.models import WebhookEndpoint
from notifications.services import endpoint_create


@pytest.fixture
def production(settings):  # type: ignore[no-untyped-def]
    settings.WEBHOOK_REQUIRE_HTTPS = True
    settings.WEBHOOK_ALLOW_PRIVATE_ADDRESSES = False
    return settings


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://93.184.216.34/hook", "https://"),
        ("https://127.0.0.1/hook", "private, loopback"),
        ("https://localhost:8443/hook", "private, loopback"),
        ("https://10.1.2.3/hook", "private, loopback"),
        ("https://192.168.0.10/hook", "private, loopback"),
        ("https://169.254.169.254/latest/meta-data", "private, loopback"),
        ("https://[::1]/hook", "private, loopback"),
        ("https://[::ffff:127.0.0.1]/hook", "private, loopback"),
        ("https://0.0.0.0/hook", "private, loopback"),
        ("https://240.0.0.1/hook", "private, loopback"),
        ("https://user:pw@93.184.216.34/hook", "no user name or password"),
        ("ftp://93.184.216.34/hook", "https://"),
        ("https:///nohost", "https://"),
        ("https://93.184.216.34:99999/", "not a valid URL"),
        ("https://exa mple.com/", "without spaces"),
        ("https://no-such-host.invalid/hook", "cannot be resolved"),
        # 6to4 embeds an IPv4 address (here 192.168.1.1); site-local is private though deprecated.
        ("https://[2002:c0a8:101::1]/hook", "private, loopback"),
        ("https://[2002:808:808::1]/hook", "private, loopback"),
        ("https://[fec0::1]/hook", "private, loopback"),
        # Privileged ports other than the web's: mail, SSH, databases' admin ports behind a public address.
        ("https://93.184.216.34:25/hook", "port 25"),
        ("https://93.184.216.34:22/hook", "port 22"),
    ],
)
def test_production_refuses_unsafe_urls(production, url: str, reason: str) -> None:
    with pytest.raises(UnsafeUrl, match=reason):
        url_check(url)


def test_production_accepts_https_on_a_public_address_and_pins_it(production) -> None:
    target = url_check("https://93.184.216.34:8443/hooks/lium?x=1")
    assert target.address == "93.184.216.34" and target.host == "93.184.216.34"


@pytest.mark.parametrize("url", ["https://93.184.216.34:443/h", "https://93.184.216.34:1024/h"])
def test_production_accepts_the_https_port_and_unprivileged_ports(production, url: str) -> None:
    assert url_check(url).address == "93.184.216.34"


def test_production_refuses_port_80_only_for_want_of_https(production, settings) -> None:
    settings.WEBHOOK_REQUIRE_HTTPS = False
    assert url_check("http://93.184.216.34:80/h").address == "93.184.216.34"
    with pytest.raises(UnsafeUrl, match="port 8"):
        url_check("http://93.184.216.34:8/h")


def test_development_allows_the_demo_receiver_on_loopback(settings) -> None:
    settings.WEBHOOK_REQUIRE_HTTPS = False
    settings.WEBHOOK_ALLOW_PRIVATE_ADDRESSES = True
    assert url_check("http://127.0.0.1:9000/hook").address is None


@pytest.mark.django_db
def test_registration_refuses_http_and_private_addresses_in_production(production, alice) -> None:
    acme = alice.memberships.get().customer
    for url in ("http://93.184.216.34/hook", "https://127.0.0.1/hook"):
        with pytest.raises(ValidationError) as caught:
            endpoint_create(customer=acme, url=url, events=["*"], created_by=alice)
        assert caught.value.code == "unsafe_url"
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.django_db
def test_the_secret_is_stored_encrypted(alice, settings) -> None:
    endpoint, secret = endpoint_create(
        customer=alice.memberships.get().customer, url="http://127.0.0.1:9/h", events=["*"], created_by=alice
    )
    stored = WebhookEndpoint.objects.get(pk=endpoint.pk)
    assert secret not in stored.secret_encrypted and stored.get_secret() == secret


@pytest.mark.parametrize("host", ["a" * 64 + ".example.com", "a..example.com", "b" * 400])
def test_a_host_name_no_resolver_can_encode_is_refused_when_registered(host: str) -> None:
    # Without the check, a delivery (or the operators' runway alert) met a UnicodeError in the HTTP client.
    with pytest.raises(UnsafeUrl, match="host name"):
        url_check(f"https://{host}/hook")


@pytest.mark.django_db(transaction=True)
def test_two_registrations_at_once_cannot_pass_the_endpoint_limit(alice, monkeypatch: pytest.MonkeyPatch) -> None:
    import contextlib
    import threading

    from django.db import connection

    from notifications import services

    if connection.vendor != "postgresql":
        pytest.skip("threads share one SQLite file badly; PostgreSQL shows the race")
    monkeypatch.setattr(services, "MAX_ENDPOINTS_PER_CUSTOMER", 1)
    # Both registrations passed the count before either inserted: meet there, or give up waiting when the
    # other one is held back by a lock (which is the point).
    meet = threading.Barrier(2)
    real_secret = services._secret

    def secret_after_meeting() -> str:
        with contextlib.suppress(threading.BrokenBarrierError):
            meet.wait(timeout=3)
        return real_secret()

    monkeypatch.setattr(services, "_secret", secret_after_meeting)
    acme = alice.memberships.get().customer
    refused: list[str] = []

    def register(n: int) -> None:
        try:
            endpoint_create(customer=acme, url=f"http://127.0.0.1:9/h{n}", events=["*"], created_by=alice)
        except ValidationError as exc:
            refused.append(exc.code or "")
        finally:
            connection.close()

    threads = [threading.Thread(target=register, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert WebhookEndpoint.objects.filter(customer=acme).count() == 1
    assert refused == ["too_many_endpoints"]
