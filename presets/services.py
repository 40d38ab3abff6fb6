"""Writes of presets: save (a unique name per customer) and delete."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from accounts.models import Customer
from presets.models import Preset

MAX_PRESETS_PER_CUSTOMER = 200


def preset_create(*, customer: Customer, created_by: User | None, fields: dict[str, Any]) -> Preset:
    """Save a preset from a valid `PresetForm`'s fields; raise ValidationError (keyed by field) saying what to fix."""
    if Preset.objects.filter(customer=customer).count() >= MAX_PRESETS_PER_CUSTOMER:
        message = f"A customer may keep at most {MAX_PRESETS_PER_CUSTOMER} presets; delete one first."
        raise ValidationError({"name": ValidationError(message, code="too_many_presets")})
    preset = Preset(customer=customer, created_by=created_by, **fields)
    try:
        with transaction.atomic():  # a savepoint: the caller's transaction stays usable after a duplicate name
            preset.save()
    except IntegrityError as exc:
        message = f"{customer.name} already has a preset named '{preset.name}'; choose another name."
        raise ValidationError({"name": ValidationError(message, code="duplicate_name")}) from exc
    return preset


def preset_delete(*, preset: Preset) -> None:
    """Delete a preset; watches made from it keep their own copy of what they look for."""
    preset.delete()
