"""URLs: the profile pages for API keys (include at /profile/api-keys/) and the JSON API v1 (api_v1_urls)."""

import functools
from typing import Any

from django.urls import path, re_path

from api import views
from api.errors import not_found_view

# The profile pages' namespace; the JSON API's own URLs are namespaced "api-v1" by django-ninja.
app_name = "api"

urlpatterns = [
    path("", views.api_keys, name="keys"),
    path("<int:pk>/revoke/", views.api_key_revoke, name="key_revoke"),
]


@functools.cache  # ninja refuses to build one API's URLs twice
def api_v1_urls() -> tuple[list[Any], str, str]:
    """Return the API's URLconf plus a catch-all 404 in the error envelope."""
    from api.v1 import api

    patterns, app_name, namespace = api.urls
    patterns.append(re_path(r"^.*$", not_found_view, name="api-not-found"))
    return patterns, app_name, namespace
