"""Every change to someone's sign-in is audited (`accounts.audit.account_change_record`); django-allauth e-mails
the user about each (ACCOUNT_EMAIL_NOTIFICATIONS), and `accounts.user_sessions` about sessions ended.

Connected in AccountsConfig.ready: allauth's signals for password, e-mail and two-factor changes, Django's
user_logged_in for the two-factor enrolment rule (`accounts.two_factor`), a user's save for their e-mail.
"""

from __future__ import annotations

from typing import Any

from allauth.account import signals as account_signals
from allauth.account.models import EmailAddress
from allauth.mfa import signals as mfa_signals
from django.contrib.auth.models import User
from django.contrib.auth.signals import user_logged_in
from django.db.models.signals import post_save

from accounts import two_factor
from accounts.audit import account_change_record

# allauth's signal -> what the audit log says.
ACCOUNT_CHANGES = {
    account_signals.password_changed: "changed their password",
    account_signals.password_set: "set a password",
    account_signals.password_reset: "reset their password through an e-mailed link",
}
AUTHENTICATOR_WORDS = {"totp": "authenticator app", "recovery_codes": "recovery codes", "webauthn": "security key"}


def _recorder(what: str):  # type: ignore[no-untyped-def]
    def receiver(*, request: Any = None, user: Any, **_kwargs: Any) -> None:
        account_change_record(user=user, what=what, request=request)

    return receiver


def email_changed(*, request: Any = None, user: Any, from_email_address: Any, to_email_address: Any, **_: Any) -> None:
    old = from_email_address.email if from_email_address else "none"
    account_change_record(
        user=user, what=f"changed their e-mail from {old} to {to_email_address.email}", request=request
    )


def email_added(*, request: Any = None, user: Any, email_address: Any, **_kwargs: Any) -> None:
    account_change_record(user=user, what=f"asked to change their e-mail to {email_address.email}", request=request)


def email_removed(*, request: Any = None, user: Any, email_address: Any, **_kwargs: Any) -> None:
    account_change_record(user=user, what=f"removed the e-mail {email_address.email}", request=request)


def authenticator_changed(verb: str):  # type: ignore[no-untyped-def]
    def receiver(*, request: Any = None, user: Any, authenticator: Any, **_kwargs: Any) -> None:
        kind = AUTHENTICATOR_WORDS.get(authenticator.type, authenticator.type)
        account_change_record(user=user, what=f"{verb} {kind}", request=request)

    return receiver


def user_saved(*, instance: User, raw: bool = False, update_fields: Any = None, **_kwargs: Any) -> None:
    """A user given an e-mail outside allauth (create_user, the admin, an invitation) gets it as their allauth
    address, verified as the dashboard has always trusted it (notices go there): allauth treats an unverified
    address as a change in progress, and a later change would drop it before the new one is confirmed."""
    if raw or not instance.email or (update_fields is not None and "email" not in update_fields):
        return  # a sign-in saves last_login only: no query then
    if EmailAddress.objects.filter(user_id=instance.pk).exists():
        return
    if EmailAddress.objects.filter(email__iexact=instance.email).exists():
        return  # someone else's address already: never two accounts on one address
    EmailAddress.objects.create(user=instance, email=instance.email.lower(), primary=True, verified=True)


def account_events_connect() -> None:
    """Connect the audit and two-factor receivers (AccountsConfig.ready)."""
    for signal, what in ACCOUNT_CHANGES.items():
        signal.connect(_recorder(what), weak=False, dispatch_uid=f"account_change:{what}")
    account_signals.email_changed.connect(email_changed, dispatch_uid="account_change:email_changed")
    account_signals.email_added.connect(email_added, dispatch_uid="account_change:email_added")
    account_signals.email_removed.connect(email_removed, dispatch_uid="account_change:email_removed")
    for signal, verb in (
        (mfa_signals.authenticator_added, "added an"),
        (mfa_signals.authenticator_removed, "removed their"),
        (mfa_signals.authenticator_reset, "generated new"),
    ):
        signal.connect(authenticator_changed(verb), weak=False, dispatch_uid=f"account_change:authenticator {verb}")
    mfa_signals.authenticator_added.connect(two_factor.authenticator_added, dispatch_uid="two_factor:added")
    user_logged_in.connect(two_factor.signed_in, dispatch_uid="two_factor:signed_in")
    post_save.connect(user_saved, sender=User, dispatch_uid="account_email:user_saved")
