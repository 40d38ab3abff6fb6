from django.urls import path

from rentals import views

urlpatterns = [
    path("fabrics/", views.fabric_list, name="fabric_list"),
    path("rent/", views.rent, name="rent"),
    path("rent/summary/", views.rent_summary, name="rent_summary"),
    path("rentals/", views.rental_list, name="rental_list"),
    path("rentals/<uuid:public_id>/", views.rental_detail, name="rental_detail"),
    # rentals/<uuid:public_id>/progress/ (rental_progress) is the first pattern of dashboard/urls.py.
    path("rentals/<uuid:public_id>/terminate/", views.rental_terminate, name="rental_terminate"),
    path("rentals/<uuid:public_id>/cancel/", views.rental_cancel, name="rental_cancel"),
    path("rentals/<uuid:public_id>/schedule-removal/", views.rental_schedule_removal, name="rental_schedule_removal"),
]
