from django.apps import AppConfig


class AccessConfig(AppConfig):
    """Roles, operator scopes, API tokens, Kubernetes impersonation and single sign-on."""

    name = "access"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here, not at the top: this module is loaded before the app registry is ready, and ready()
        # is Django's documented place for registrations (drf-spectacular's extension for our tokens).
        from access import schema  # noqa: F401  (registers the OpenAPI security scheme)
