"""The preset form: the web page and the JSON API validate a preset with it, with the rent form's rules."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms
from django.core.validators import MaxValueValidator

from accounts.validators import ssh_public_keys_parse
from presets.models import FABRIC_TYPES
from rentals.orders.validators import POD_NAME_HELP, validate_pod_name

MAX_NODES = 64


class NodeWantFields(forms.Form):
    """What nodes to look for: shared by presets and capacity watches."""

    gpu_type = forms.CharField(
        label="GPU type",
        required=False,
        max_length=100,
        help_text="Part of the GPU's name, e.g. H100; empty for any.",
    )
    node_count = forms.IntegerField(label="Nodes", min_value=2, max_value=MAX_NODES, help_text="2 to 64 whole nodes.")
    fabric_type = forms.ChoiceField(label="Fabric type", required=False, choices=FABRIC_TYPES)
    min_link_rate_gbps = forms.IntegerField(
        label="Minimum link rate (Gb/s)", required=False, min_value=1, max_value=10_000, help_text="Empty for any."
    )
    max_price_per_node_hour = forms.DecimalField(
        label="Maximum $ per node-hour",
        required=False,
        min_value=Decimal("0.01"),
        max_digits=10,
        decimal_places=4,
        help_text="Each node's price (all its GPUs) per hour; empty for any.",
    )

    def clean_gpu_type(self) -> str:
        return str(self.cleaned_data["gpu_type"]).replace("\x00", "").strip()

    def model_fields(self) -> dict[str, Any]:
        """Return the model's fields (call after is_valid())."""
        return dict(self.cleaned_data)


class PresetForm(NodeWantFields):
    """A named rent form: its nodes are picked when it is used."""

    name = forms.CharField(max_length=100, help_text="Unique within your customer; your team sees it too.")
    pod_name = forms.CharField(max_length=63, help_text=POD_NAME_HELP, validators=[validate_pod_name])
    ssh_public_keys = forms.CharField(
        label="SSH public keys",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One per line, as in your ~/.ssh/id_ed25519.pub.",
        error_messages={"required": "Add at least one SSH public key: you need it to log in to the nodes."},
    )
    template_id = forms.CharField(
        label="Template id", required=False, max_length=100, help_text="Empty for the newest cluster template."
    )
    initial_port_count = forms.IntegerField(label="Ports per node", required=False, min_value=1, max_value=64)
    termination_hours = forms.IntegerField(
        label="Remove automatically after (hours)", required=False, min_value=1, max_value=720
    )
    enable_jupyter = forms.BooleanField(label="Jupyter", required=False)

    field_order = ["name", "gpu_type", "node_count", "fabric_type", "min_link_rate_gbps", "max_price_per_node_hour"]

    def clean_name(self) -> str:
        name = str(self.cleaned_data["name"]).replace("\x00", "").strip()
        if not name:
            raise forms.ValidationError("Give the preset a name.", code="required")
        return name

    def clean_template_id(self) -> str:
        return str(self.cleaned_data["template_id"]).replace("\x00", "").strip()

    def clean_ssh_public_keys(self) -> str:
        return "\n".join(ssh_public_keys_parse(self.cleaned_data["ssh_public_keys"]))


class WatchForm(NodeWantFields):
    """A capacity watch: what to look for (or a preset), for how long, and whether to rent by itself."""

    node_count = forms.IntegerField(
        label="Nodes", required=False, min_value=2, max_value=MAX_NODES, help_text="2 to 64; empty with a preset."
    )
    hours = forms.IntegerField(label="Watch for (hours)", required=False, min_value=1)
    auto_rent = forms.BooleanField(
        label="Rent them for me",
        required=False,
        help_text="Only with a preset: its pod name, keys and options; budgets and quotas apply, once.",
    )

    def __init__(self, *args: Any, max_hours: int, default_hours: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        hours = self.fields["hours"]
        hours.max_value = max_hours  # type: ignore[attr-defined]
        hours.validators.append(MaxValueValidator(max_hours, f"Watch for at most {max_hours} hours."))
        hours.help_text = f"1 to {max_hours}; empty for {default_hours}."
