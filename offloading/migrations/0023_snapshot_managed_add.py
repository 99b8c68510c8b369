"""Issue 28, the snapshot tables carry their managed cluster, step 1 of 3: the column, nullable (0024 fills
it, 0025 makes it required and the unique keys per cluster). Three migrations, not one: on PostgreSQL
the foreign key checks of 0024's updates are deferred to its commit, and a table with pending checks
cannot be altered in the same transaction."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("offloading", "0022_audit_cluster_actions"),
    ]

    operations = [
        migrations.AddField(
            model_name="snapshotstate",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.AddField(
            model_name="cluster",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.AddField(
            model_name="virtualnode",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.AddField(
            model_name="namespace",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.AddField(
            model_name="clusteroffloading",
            name="managed",
            field=models.ForeignKey(
                null=True, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="offloading.managedcluster"
            ),
        ),
        migrations.AddField(
            model_name="statustransition",
            name="managed",
            field=models.ForeignKey(
                null=True, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="offloading.managedcluster"
            ),
        ),
        migrations.AddField(
            model_name="pod",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.AddField(
            model_name="kubeevent",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.AddField(
            model_name="liqoresource",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.AddField(
            model_name="peernamespacemap",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
        migrations.AddField(
            model_name="mappingentry",
            name="managed",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="offloading.managedcluster",
            ),
        ),
    ]
