from django.apps import AppConfig


class AccessConfig(AppConfig):
    """Roles, operator scopes, API tokens, Kubernetes impersonation and single sign-on."""

    name = "access"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from access import schema  # noqa: F401  (registers the OpenAPI security scheme)
