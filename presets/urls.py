"""Customer pages of presets and capacity watches (included at the root by dashboard/urls.py)."""

from django.urls import path

from presets import views, views_watches

app_name = "presets"

urlpatterns = [
    path("presets/", views.preset_list, name="preset_list"),
    path("presets/from-rent-form/", views.preset_from_rent_form, name="preset_from_rent_form"),
    path("presets/<int:preset_id>/use/", views.preset_use, name="preset_use"),
    path("presets/<int:preset_id>/delete/", views.preset_delete, name="preset_delete"),
    path("rentals/<uuid:public_id>/again/", views.rental_rent_again, name="rental_rent_again"),
    path("watches/", views_watches.watch_list, name="watch_list"),
    path("watches/<int:watch_id>/cancel/", views_watches.watch_cancel, name="watch_cancel"),
]
