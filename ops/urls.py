from django.urls import path

from ops import views

urlpatterns = [
    path("", views.overview, name="ops_overview"),
    path("panel/", views.overview_panel, name="ops_overview_panel"),
    path("search/", views.search, name="ops_search"),
    path("rentals/<uuid:public_id>/", views.rental_timeline, name="ops_rental"),
    path("rentals/<uuid:public_id>/<slug:action>/", views.rental_action, name="ops_rental_action"),
    path("usage/", views.usage, name="ops_usage"),
    path("usage.csv", views.usage_csv, name="ops_usage_csv"),
    path("audit/", views.audit, name="ops_audit"),
]
