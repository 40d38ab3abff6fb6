"""The rent form: reads a cluster order's fields; the order service (`rentals.orders.service`) checks the order."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from accounts.models import Customer, SshPublicKey
from accounts.validators import ssh_public_keys_parse
from rentals.offers import Template
from rentals.orders.order import OPTIONS
from rentals.orders.scheduled import start_at_check
from rentals.orders.service import OrderChoice
from rentals.orders.validators import POD_NAME_HELP, validate_pod_name
from rentals.removal.policy import removal_policy_hint
from rentals.upstream.parse_offers import Fabric


class NodeSelectionField(forms.MultipleChoiceField):
    """Node ids; checked against the fabric's offers by the order service, which says what is wrong."""

    def validate(self, value: Any) -> None:
        if self.required and not value:
            raise ValidationError(self.error_messages["required"], code="required")


# A browser's datetime-local value, or the same typed by hand (in UTC: the dashboard's time zone).
START_AT_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"]


class RentForm(forms.Form):
    """Choose nodes of one fabric and the order's options."""

    # The customers the view has already read (with their credentials): choosing one costs no query.
    customer = forms.ChoiceField()
    executor_ids = NodeSelectionField(
        label="Nodes", widget=forms.CheckboxSelectMultiple, error_messages={"required": "Select at least 2 nodes."}
    )
    pod_name = forms.CharField(max_length=63, help_text=POD_NAME_HELP, validators=[validate_pod_name])
    # The user's saved keys, also read once by the view and chosen among in Python: a model choice field's
    # `pk IN (...)` took any number, and SQLite refuses one past 64 bits (a 500, not a message).
    saved_keys = forms.MultipleChoiceField(
        label="Saved SSH keys",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Keys saved in your profile.",
        error_messages={"invalid_choice": "%(value)s is not one of your saved keys; choose from the list."},
    )
    ssh_public_keys = forms.CharField(
        required=False,
        label="SSH public keys",
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "ssh-ed25519 AAAA… you@laptop"}),
        help_text="One per line, as in your ~/.ssh/id_ed25519.pub (in addition to any saved key chosen above).",
    )
    template_id = forms.ChoiceField(label="Template", help_text="Cluster templates only; the newest is preselected.")
    initial_port_count = forms.IntegerField(
        label="Ports per node", required=False, min_value=1, max_value=64, help_text="Leave empty for the default."
    )
    termination_hours = forms.IntegerField(
        label="Remove automatically after (hours)",
        required=False,
        min_value=1,
        max_value=720,
        help_text="1 to 720 hours; empty keeps the cluster until you terminate it.",
    )
    enable_jupyter = forms.BooleanField(label="Jupyter", required=False)
    enable_volume_encryption = forms.BooleanField(label="Encrypt volumes", required=False, initial=True)
    enable_backups = forms.BooleanField(label="Backups", required=False, initial=True)
    verify_fabric = forms.BooleanField(
        label="Verify the fabric before hand-over",
        required=False,
        help_text="We connect to every node over SSH with a key of our own, measure the all-reduce bandwidth and name "
        "a slow node; the key is removed afterwards. Ticked by default when your customer chose so.",
    )
    start_at = forms.DateTimeField(
        label="Start at (UTC)",
        required=False,
        input_formats=START_AT_FORMATS,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        help_text="Optional: order now, send it then (at most 30 days ahead). Its nodes are checked again at that "
        "time, with your budget and quotas; empty sends it now.",
    )
    # Opened from a preset: with a start time, the preset's cheapest matching nodes are picked again at that time.
    # Bounded by the column (`Rental.preset_id`, a PositiveIntegerField): a tampered id is refused, not a 500.
    preset_id = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=2_147_483_647,
        widget=forms.HiddenInput,
        error_messages={
            key: "This form's preset is not valid. Open the rent form from the preset again."
            for key in ("invalid", "min_value", "max_value")
        },
    )
    # The seed's remaining fields, under "Advanced".
    volume_id = forms.UUIDField(label="Volume id", required=False)
    backup_log_id = forms.UUIDField(label="Restore from backup id", required=False)
    restore_path = forms.CharField(label="Restore path", required=False, max_length=500)
    skip_add_agent_ssh_key = forms.BooleanField(label="Skip the agent's SSH key", required=False)
    ncu_profiling = forms.BooleanField(label="Allow Nsight Compute profiling", required=False)
    customer_ref = forms.CharField(
        label="Customer ref (X-Customer-Ref)",
        required=False,
        max_length=64,
        strip=False,
        help_text="Operators only: overrides the customer's ref for this rental. Empty uses the customer's.",
    )
    submit_token = forms.UUIDField(widget=forms.HiddenInput)

    def __init__(
        self,
        *args: Any,
        fabric: Fabric,
        templates: list[Template],
        customers: Any,
        may_set_customer_ref: bool,
        saved_keys: Iterable[SshPublicKey] = (),
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("initial", {})
        kwargs["initial"].setdefault("submit_token", uuid.uuid4())
        super().__init__(*args, **kwargs)
        self.fabric = fabric
        self.customers = {str(customer.pk): customer for customer in customers}
        self.fields["customer"].choices = [(pk, customer.name) for pk, customer in self.customers.items()]  # type: ignore[attr-defined]
        self.fields["executor_ids"].choices = [(node.id, node.id) for node in fabric.nodes]  # type: ignore[attr-defined]
        self.fields["template_id"].choices = [(t.id, t.label) for t in templates]  # type: ignore[attr-defined]
        if templates:
            self.fields["template_id"].initial = templates[0].id
        if not may_set_customer_ref:
            del self.fields["customer_ref"]
        # The customer's setting chooses the default (the first customer's when the user may rent for several).
        first = next(iter(self.customers.values()), None)
        self.fields["verify_fabric"].initial = bool(first and first.verify_fabric_default)
        hints = [removal_policy_hint(customer) for customer in self.customers.values()]
        if any(hints):
            self.fields["termination_hours"].help_text = " ".join(hint for hint in hints if hint)
        self.saved_key_by_id = {str(key.pk): key for key in saved_keys}
        if self.saved_key_by_id:
            self.fields["saved_keys"].choices = [(pk, key.name) for pk, key in self.saved_key_by_id.items()]  # type: ignore[attr-defined]
            self.fields["saved_keys"].initial = list(self.saved_key_by_id)
        else:
            del self.fields["saved_keys"]

    def clean_start_at(self) -> datetime | None:
        value = self.cleaned_data.get("start_at")
        return start_at_check(value) if value is not None else None

    def clean_customer(self) -> Customer:
        return self.customers[self.cleaned_data["customer"]]

    def clean_saved_keys(self) -> list[SshPublicKey]:
        return [self.saved_key_by_id[pk] for pk in self.cleaned_data["saved_keys"]]

    def clean_ssh_public_keys(self) -> list[str]:
        text = self.cleaned_data["ssh_public_keys"]
        return ssh_public_keys_parse(text) if text.strip() else []

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        saved = [key.public_key for key in data.get("saved_keys") or []]
        pasted = data.get("ssh_public_keys")
        if pasted is not None and not saved and not pasted:
            self.add_error(
                "ssh_public_keys", "Add at least one SSH public key (paste it, or save one in your profile)."
            )
        data["all_public_keys"] = list(dict.fromkeys(saved + (pasted or [])))
        return data

    def choice(self) -> OrderChoice:
        """Return what the form asks for, for the order service (call after is_valid())."""
        data = self.cleaned_data
        return OrderChoice(
            customer=data["customer"].pk,
            customer_ref=data.get("customer_ref") or None,
            fabric_id=self.fabric.fabric_id,
            executor_ids=list(data["executor_ids"]),
            template_id=data.get("template_id") or None,
            pod_name=data["pod_name"],
            public_keys=data["all_public_keys"],
            verify_fabric=data.get("verify_fabric", False),
            start_at=data.get("start_at"),
            preset_id=data.get("preset_id"),
            options={
                **{name: data[name] for name in OPTIONS},
                "advanced": {
                    "volume_id": str(data["volume_id"]) if data.get("volume_id") else None,
                    "backup_log_id": str(data["backup_log_id"]) if data.get("backup_log_id") else None,
                    "restore_path": data.get("restore_path") or None,
                    "skip_add_agent_ssh_key": data.get("skip_add_agent_ssh_key") or None,
                    "ncu_profiling": data.get("ncu_profiling") or None,
                },
            },
        )
