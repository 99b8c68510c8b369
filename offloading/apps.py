from django.apps import AppConfig


class OffloadingConfig(AppConfig):
    name = "offloading"
    verbose_name = "Namespace offloading"

    def ready(self) -> None:
        # Imported here, not at the top: this module is loaded before the app registry is ready (no model
        # may be imported yet), and ready() is Django's documented place to connect signal handlers.
        from django.db.models.signals import post_migrate

        from offloading.models import fleet, livetriggers

        # The live pages' triggers after every migrate and flush (a SQLite table rebuild drops them).
        post_migrate.connect(livetriggers.ensure, sender=self, dispatch_uid="liqo-dash-live-triggers")
        # The default managed cluster's memoised key: a migrate or a flush may have replaced its row.
        post_migrate.connect(fleet.forget_default, sender=self, dispatch_uid="liqo-dash-default-managed")
