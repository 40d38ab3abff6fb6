from django.urls import path

from billing import team_security, views

app_name = "billing"

urlpatterns = [
    path("usage/", views.usage, name="usage"),
    path("usage.csv", views.usage_csv, name="usage_csv"),
    path("customers/<int:customer_id>/team/", views.team, name="team"),
    path("customers/<int:customer_id>/team/invite/", views.invite_create, name="invite_create"),
    path("customers/<int:customer_id>/team/invitations/<int:pk>/revoke/", views.invite_revoke, name="invite_revoke"),
    path("customers/<int:customer_id>/team/members/<int:pk>/remove/", views.member_remove, name="member_remove"),
    path("customers/<int:customer_id>/team/members/<int:pk>/admin/", views.member_admin, name="member_admin"),
    path("customers/<int:customer_id>/budget/", views.budget_set, name="budget_set"),
    path("customers/<int:customer_id>/quotas/", views.quota_set, name="quota_set"),
    path("customers/<int:customer_id>/team/two-factor/", team_security.two_factor_require, name="two_factor_require"),
    path(
        "customers/<int:customer_id>/team/members/<int:pk>/sessions/",
        team_security.member_sessions,
        name="member_sessions",
    ),
    path(
        "customers/<int:customer_id>/team/members/<int:pk>/sessions/end/",
        team_security.member_sessions_end,
        name="member_sessions_end",
    ),
    path("invite/", views.invite_accept, name="invite_accept"),
    path("invite/<str:token>/", views.invite_landing, name="invite_landing"),
    path("billing/budgets/", views.budgets, name="budgets"),
]
