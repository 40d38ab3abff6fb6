"""Reads of presets and watches, scoped to the customers the user may see (reads) or rent for (changes)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet
from django.http import Http404

from presets.models import CapacityWatch, Preset
from rentals.selectors import customer_list_for_renting, customer_list_for_user


def preset_list_for_user(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Preset]:
    """Return the presets of the customers the user may see (support: every customer's)."""
    return Preset.objects.filter(customer__in=customer_list_for_user(user=user)).select_related("customer")


def preset_get_for_user(*, user: AbstractBaseUser | AnonymousUser, pk: object, change: bool = False) -> Preset:
    """Return one preset the user may use (`change`: a customer they rent for), or raise Http404."""
    customers = customer_list_for_renting(user=user) if change else customer_list_for_user(user=user)
    try:
        return Preset.objects.select_related("customer__default_credential").get(
            pk=int(str(pk)), customer__in=customers
        )
    except (Preset.DoesNotExist, ValueError, OverflowError) as exc:
        raise Http404("No such preset.") from exc


def watch_list_for_user(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[CapacityWatch]:
    """Return the watches of the customers the user may see, newest first."""
    customers = customer_list_for_user(user=user)
    return CapacityWatch.objects.filter(customer__in=customers).select_related("customer", "preset", "rental")


def watch_get_for_user(*, user: AbstractBaseUser | AnonymousUser, pk: object, change: bool = False) -> CapacityWatch:
    """Return one watch the user may see (`change`: of a customer they rent for), or raise Http404."""
    customers = customer_list_for_renting(user=user) if change else customer_list_for_user(user=user)
    try:
        return CapacityWatch.objects.select_related("customer").get(pk=int(str(pk)), customer__in=customers)
    except (CapacityWatch.DoesNotExist, ValueError, OverflowError) as exc:
        raise Http404("No such watch.") from exc
