"""Issue 28, stage 2a: every reader of the snapshot tables names one managed cluster (``objects.of``), so
the indexes that served the pages' hot reads lead with the managed cluster: the phase counts, a peer's
offloadings (and the namespaces that select it), a namespace's history and the latest events. Without the
cluster first, SQLite (no statistics) took the (managed, name) key or the lone managed index instead and
sorted a cluster's every row (the phase counts of 10,000 namespaces: a covering index scan became a
scan of the table and a sort)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("offloading", "0025_snapshot_managed_keys"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="clusteroffloading",
            name="cluster_offloading_by_cluster",
        ),
        migrations.RemoveIndex(
            model_name="namespace",
            name="namespace_phase_counts",
        ),
        migrations.AddIndex(
            model_name="clusteroffloading",
            index=models.Index(fields=["managed", "cluster_id", "selected"], name="cluster_offloading_by_peer"),
        ),
        migrations.AddIndex(
            model_name="kubeevent",
            index=models.Index(fields=["managed", "last_time"], name="events_latest_per_cluster"),
        ),
        migrations.AddIndex(
            model_name="namespace",
            index=models.Index(
                fields=["managed", "offloaded", "offloading_phase"], name="namespace_phases_per_cluster"
            ),
        ),
        migrations.AddIndex(
            model_name="statustransition",
            index=models.Index(fields=["managed", "namespace", "time"], name="transition_history"),
        ),
    ]
