"""Customer pages (included first, at the root, by dashboard/urls.py): fabrics, renting, my rentals."""

from django.urls import path

from rentals import views

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
    path(
        "rentals/<uuid:public_id>/schedule-removal/",
        views.rental_removal_schedule_form,
        name="rental_schedule_removal",
    ),
]
