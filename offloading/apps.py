from django.apps import AppConfig


class OffloadingConfig(AppConfig):
    name = "offloading"
    verbose_name = "Namespace offloading"
