"""Customer pages (included first, at the root, by dashboard/urls.py): fabrics, renting, my rentals."""

from django.urls import path

from rentals.web import lifecycle as views_lifecycle
from rentals.web import schedule as views_schedule
from rentals.web import verification as views_verification
from rentals.web import views
from rentals.web.repair import member_repair

app_name = "rentals"

urlpatterns = [
    # First: the URL open rental pages poll all day (Django tries the patterns in order).
    path("rentals/<uuid:public_id>/progress/", views.rental_progress, name="rental_progress"),
    path("fabrics/", views.fabric_list, name="fabric_list"),
    path("rent/", views.rent, name="rent"),
    path("rent/summary/", views.rent_summary, name="rent_summary"),
    path("rentals/", views.rental_list, name="rental_list"),
    path("rentals/<uuid:public_id>/", views.rental_detail, name="rental_detail"),
    path("rentals/<uuid:public_id>/terminate/", views.rental_terminate, name="rental_terminate"),
    path("rentals/<uuid:public_id>/cancel/", views.rental_cancel, name="rental_cancel"),
    path("rentals/<uuid:public_id>/reschedule/", views_schedule.rental_reschedule, name="rental_reschedule"),
    path(
        "rentals/<uuid:public_id>/schedule-removal/",
        views_lifecycle.rental_removal_schedule_form,
        name="rental_schedule_removal",
    ),
    path(
        "rentals/<uuid:public_id>/cancel-removal/",
        views_lifecycle.rental_removal_cancel_form,
        name="rental_cancel_removal",
    ),
    path(
        "rentals/<uuid:public_id>/members/<int:rank>/reboot/",
        member_repair,
        {"action": "reboot"},
        name="member_reboot",
    ),
    path(
        "rentals/<uuid:public_id>/members/<int:rank>/reset-gpu/",
        member_repair,
        {"action": "reset-gpu"},
        name="member_reset_gpu",
    ),
    path("rentals/<uuid:public_id>/check/keep/", views_verification.rental_check_keep, name="rental_check_keep"),
    path(
        "rentals/<uuid:public_id>/check/rent-again/",
        views_verification.rental_check_rent_again,
        name="rental_check_rent_again",
    ),
    path("rentals/<uuid:public_id>/ssh-config/", views_lifecycle.rental_ssh_config, name="rental_ssh_config"),
    path("rentals/<uuid:public_id>/env/<int:rank>/", views_lifecycle.rental_env_file, name="rental_env_file"),
    path(
        "customers/<int:customer_id>/removal-policy/",
        views_lifecycle.customer_removal_policy,
        name="customer_removal_policy",
    ),
]
