"""The Django admin as a second staff console: rentals and upstream credentials are registered here, in the
staff app, because their actions use the same services as the ops pages."""

from ops import admin_credentials, admin_rentals

__all__ = ["admin_credentials", "admin_rentals"]
