"""Issue 28, changes and bulks carry their managed cluster: the column (nullable), the existing rows moved to
the default cluster (made as 0024 makes it when rows exist and it does not), then required; the
per-namespace order of changes (the older pending change, the namespace's next change) is per cluster, so
its index leads with the cluster. One migration: PostgreSQL's foreign-key checks of the fill are run at
once (``checks_now``, as 0025 does) before the column is altered in the same transaction."""

import importlib

import django.db.models.deletion
from django.db import migrations, models

fill = importlib.import_module("offloading.migrations.0024_snapshot_managed_fill")
keys = importlib.import_module("offloading.migrations.0025_snapshot_managed_keys")

TABLES = ("changerequest", "bulkrequest")


def move_rows(apps, schema_editor):
    models_ = [apps.get_model("offloading", name) for name in TABLES]
    if not any(model.objects.filter(managed__isnull=True).exists() for model in models_):
        return
    default = fill.default_cluster(apps)
    for model in models_:
        model.objects.filter(managed__isnull=True).update(managed=default)


def key(**kwargs):
    return models.ForeignKey(
        on_delete=django.db.models.deletion.PROTECT, related_name="+", to="offloading.managedcluster", **kwargs
    )


class Migration(migrations.Migration):
    dependencies = [
        ("offloading", "0026_scoped_reader_indexes"),
    ]

    operations = [
        migrations.AddField(model_name="changerequest", name="managed", field=key(db_index=False, null=True)),
        migrations.AddField(model_name="bulkrequest", name="managed", field=key(null=True)),
        migrations.RunPython(move_rows, migrations.RunPython.noop),
        migrations.RunPython(keys.checks_now, migrations.RunPython.noop),
        migrations.AlterField(model_name="changerequest", name="managed", field=key(db_index=False)),
        migrations.AlterField(model_name="bulkrequest", name="managed", field=key()),
        migrations.RemoveIndex(model_name="changerequest", name="change_ns_state"),
        migrations.AddIndex(
            model_name="changerequest",
            index=models.Index(fields=["managed", "namespace", "state"], name="change_cluster_ns_state"),
        ),
    ]
