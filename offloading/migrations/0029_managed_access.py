"""Issue 28, access per managed cluster: impersonation on or off and the role-to-group map, each empty
(inheriting the installation's KUBE_IMPERSONATE and KUBE_IMPERSONATE_GROUPS) on every existing row."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("offloading", "0028_audit_alerts_managed"),
    ]

    operations = [
        migrations.AddField(
            model_name="managedcluster",
            name="impersonation",
            field=models.CharField(
                blank=True,
                choices=[
                    ("", "as the installation (KUBE_IMPERSONATE)"),
                    ("on", "on: as the user who asked"),
                    ("off", "off: as the dashboard itself"),
                ],
                default="",
                max_length=3,
            ),
        ),
        migrations.AddField(
            model_name="managedcluster",
            name="impersonation_groups",
            field=models.CharField(blank=True, default="", max_length=1024),
        ),
    ]
