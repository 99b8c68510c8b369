from django.apps import AppConfig


class OffloadingConfig(AppConfig):
    name = "offloading"
    verbose_name = "Namespace offloading"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from offloading.models import livetriggers

        # The live pages' triggers after every migrate and flush (a SQLite table rebuild drops them).
        post_migrate.connect(livetriggers.ensure, sender=self, dispatch_uid="liqo-dash-live-triggers")
