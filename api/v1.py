"""JSON API v1 (django-ninja), mounted at /api/v1/: schema at /api/v1/openapi.json, docs at /api/v1/docs.

The routes live in routers: fabrics (`api.fabrics`), rentals (`api.rentals`, orders through
`rentals.orders.service`), a rental's removal (`api.removal`), webhooks (`api.webhooks`) and usage (`api.usage`).
Errors use the upstream's envelope (`api.errors`).
"""

from __future__ import annotations

from ninja import NinjaAPI

from api.auth import AUTH
from api.errors import install_handlers

api = NinjaAPI(
    title="Lium cluster rentals dashboard API",
    version="1",
    description=(
        "Rent multi-node GPU clusters through the dashboard. Authenticate with a key from /profile/api-keys/ "
        "sent as `X-API-Key` or `Authorization: Bearer`. Scopes: `read` (GETs), `rent` (create rentals), "
        "`manage` (terminate, schedule or cancel a removal, reboot a member or reset its GPUs). "
        "`POST /rentals` honours `Idempotency-Key` like the "
        "Lium API: the same key and "
        "identical body within 24 h replays the first answer with `Idempotent-Replayed: true`. Errors use "
        'the envelope `{"success": false, "error": {"code", "message", "hint", "request_id"}, '
        '"message", "status_code"}`.'
    ),
    urls_namespace="api-v1",
    auth=AUTH,
    openapi_url="/openapi.json",
    docs_url="/docs",
)
install_handlers(api)
# In this order, so the schema lists the paths as it always has.
api.add_router("", "api.fabrics.router")
api.add_router("", "api.rentals.router")
api.add_router("", "api.removal.router")  # a rental's scheduled removal
api.add_router("", "api.start.router")  # a scheduled rental's start, and cancelling a rental not sent yet
api.add_router("", "api.repair.router")  # member repair: reboot, reset GPUs
api.add_router("/webhooks", "api.webhooks.router")  # webhook endpoints (notifications app)
api.add_router("/usage", "api.usage.router")  # cost per rental in a month (billing app)
api.add_router("/presets", "api.presets.router")  # saved rent forms (presets app)
api.add_router("/watches", "api.presets.watch_router")  # capacity watches (presets app)
