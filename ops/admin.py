"""The Django admin as a second staff console: rentals, upstream credentials and customers' removal policies are
registered here, in the staff app, because their actions and changes use the same services as the staff pages."""

from ops import admin_credentials, admin_policies, admin_rentals

__all__ = ["admin_credentials", "admin_policies", "admin_rentals"]
