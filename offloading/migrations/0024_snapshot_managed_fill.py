"""Issue 28, step 2 of 3: the snapshot rows that exist move to the default managed cluster. When there are
rows and no default cluster (its row was deleted since 0021), the default is made as 0021 and
offloading.models.managed.ensure_configured make it: the current context, named "default" (or
"default-2"... when that name is taken), so that LIQO_DASH_CLUSTERS can later name its context and keep
the rows attached."""

from django.db import migrations

TABLES = (
    "snapshotstate",
    "cluster",
    "virtualnode",
    "namespace",
    "clusteroffloading",
    "statustransition",
    "pod",
    "kubeevent",
    "liqoresource",
    "peernamespacemap",
    "mappingentry",
)


def default_cluster(apps):
    ManagedCluster = apps.get_model("offloading", "ManagedCluster")
    default = ManagedCluster.objects.filter(is_default=True).first()
    if default is None:
        taken = set(ManagedCluster.objects.values_list("name", flat=True))
        name, n = "default", 2
        while name in taken:
            name, n = f"default-{n}", n + 1
        default = ManagedCluster.objects.create(name=name, source="context", context="", is_default=True)
    return default


def move_rows(apps, schema_editor):
    models = [apps.get_model("offloading", name) for name in TABLES]
    if not any(model.objects.filter(managed__isnull=True).exists() for model in models):
        return
    default = default_cluster(apps)
    for model in models:
        model.objects.filter(managed__isnull=True).update(managed=default)


class Migration(migrations.Migration):
    dependencies = [
        ("offloading", "0023_snapshot_managed_add"),
    ]

    operations = [
        migrations.RunPython(move_rows, migrations.RunPython.noop),
    ]
