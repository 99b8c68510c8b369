"""Issue 28, audit events and alerts carry their managed cluster: the column, nullable; the existing rows
given the default cluster (made as 0024 makes it when there are rows and no default); then required.

The audit events that exist were sealed without a cluster: they keep ``seal_version`` 1 (what the seal
covers, offloading/models/audit.py), so the trail, its head, anchors and checkpoints verify as before;
new rows are sealed with version 2, which covers the cluster.

One migration, not three as for the snapshot (0023-0025): on PostgreSQL the foreign-key checks of the
fill are deferred to the commit, and a table with pending checks cannot be altered, so they are run
first (``SET CONSTRAINTS ALL IMMEDIATE``, as 0025 does)."""

import importlib

import django.db.models.deletion
from django.db import migrations, models

fill = importlib.import_module("offloading.migrations.0024_snapshot_managed_fill")
snapshot_keys = importlib.import_module("offloading.migrations.0025_snapshot_managed_keys")


def move_rows(apps, schema_editor):
    models_ = [apps.get_model("offloading", name) for name in ("auditevent", "alert")]
    if not any(model.objects.filter(managed__isnull=True).exists() for model in models_):
        return
    default = fill.default_cluster(apps)
    for model in models_:
        model.objects.filter(managed__isnull=True).update(managed=default)


class Migration(migrations.Migration):
    dependencies = [
        ("offloading", "0027_changes_managed"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        # The rows that exist were sealed as version 1; rows written from now on, as 2 (the default).
        migrations.AddField(
            model_name="auditevent",
            name="seal_version",
            field=models.PositiveSmallIntegerField(default=1),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="seal_version",
            field=models.PositiveSmallIntegerField(default=2),
        ),
        migrations.AddField(
            model_name="alert",
            name="managed",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.RunPython(move_rows, migrations.RunPython.noop),
        migrations.RunPython(snapshot_keys.checks_now, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="auditevent",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.AlterField(
            model_name="alert",
            name="managed",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.AddIndex(
            model_name="auditevent",
            index=models.Index(fields=["managed", "seq"], name="audit_per_cluster"),
        ),
    ]
