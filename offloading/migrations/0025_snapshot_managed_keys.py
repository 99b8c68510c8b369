"""Issue 28, step 3 of 3: every snapshot row belongs to a managed cluster (0024 moved the existing rows to
the default one), and every unique key is per cluster: a namespace, a peer, a virtual node, a pod, an
event, a Liqo resource, a NamespaceMap and its entries are unique within their cluster; one
SnapshotState per cluster."""

import importlib

import django.db.models.deletion
from django.db import migrations, models

# 0024 moved the rows that existed then. A watcher or worker of the previous version still running
# during the upgrade (the README's "Upgrade": scale them to 0 for this one) may have written rows since,
# without a cluster: they move too, here, in the transaction that makes the column required.
fill = importlib.import_module("offloading.migrations.0024_snapshot_managed_fill")


def checks_now(apps, schema_editor):
    """PostgreSQL: run the foreign-key checks the updates above left deferred, so that this
    transaction may alter the tables (it may not while trigger events are pending)."""
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")


class Migration(migrations.Migration):
    dependencies = [
        ("offloading", "0024_snapshot_managed_fill"),
    ]

    operations = [
        migrations.RunPython(fill.move_rows, migrations.RunPython.noop),
        migrations.RunPython(checks_now, migrations.RunPython.noop),
        migrations.RemoveConstraint(model_name="virtualnode", name="unique_virtual_node"),
        migrations.RemoveConstraint(model_name="pod", name="pod_namespace_name"),
        migrations.RemoveConstraint(model_name="liqoresource", name="liqo_resource_key"),
        migrations.RemoveConstraint(model_name="mappingentry", name="unique_mapping_entry"),
        migrations.AlterField(
            model_name="cluster",
            name="cluster_id",
            field=models.CharField(db_index=True, max_length=63),
        ),
        migrations.AlterField(
            model_name="namespace",
            name="name",
            field=models.CharField(db_index=True, max_length=63),
        ),
        migrations.AlterField(
            model_name="kubeevent",
            name="uid",
            field=models.CharField(max_length=64),
        ),
        migrations.AlterField(
            model_name="peernamespacemap",
            name="cluster_id",
            field=models.CharField(max_length=63),
        ),
        migrations.AlterField(
            model_name="snapshotstate",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.AlterField(
            model_name="cluster",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.AlterField(
            model_name="virtualnode",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.AlterField(
            model_name="namespace",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.AlterField(
            model_name="clusteroffloading",
            name="managed",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="+", to="offloading.managedcluster"
            ),
        ),
        migrations.AlterField(
            model_name="statustransition",
            name="managed",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="+", to="offloading.managedcluster"
            ),
        ),
        migrations.AlterField(
            model_name="pod",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.AlterField(
            model_name="kubeevent",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.AlterField(
            model_name="liqoresource",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.AlterField(
            model_name="peernamespacemap",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.AlterField(
            model_name="mappingentry",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.AddConstraint(
            model_name="snapshotstate",
            constraint=models.UniqueConstraint(fields=("managed",), name="one_snapshot_state_per_cluster"),
        ),
        migrations.AddConstraint(
            model_name="cluster",
            constraint=models.UniqueConstraint(fields=("managed", "cluster_id"), name="unique_peer_per_cluster"),
        ),
        migrations.AddConstraint(
            model_name="virtualnode",
            constraint=models.UniqueConstraint(fields=("managed", "namespace", "name"), name="unique_virtual_node"),
        ),
        migrations.AddConstraint(
            model_name="namespace",
            constraint=models.UniqueConstraint(fields=("managed", "name"), name="unique_namespace_per_cluster"),
        ),
        migrations.AddConstraint(
            model_name="pod",
            constraint=models.UniqueConstraint(fields=("managed", "namespace", "name"), name="pod_namespace_name"),
        ),
        migrations.AddConstraint(
            model_name="kubeevent",
            constraint=models.UniqueConstraint(fields=("managed", "uid"), name="unique_event_per_cluster"),
        ),
        migrations.AddConstraint(
            model_name="liqoresource",
            constraint=models.UniqueConstraint(
                fields=("managed", "kind", "namespace", "name"), name="liqo_resource_key"
            ),
        ),
        migrations.AddConstraint(
            model_name="peernamespacemap",
            constraint=models.UniqueConstraint(fields=("managed", "cluster_id"), name="unique_map_per_cluster"),
        ),
        migrations.AddConstraint(
            model_name="mappingentry",
            constraint=models.UniqueConstraint(
                fields=("managed", "cluster_id", "namespace"), name="unique_mapping_entry"
            ),
        ),
    ]
