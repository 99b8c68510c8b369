"""LiveVersion: one counter per kind of data a live page shows, bumped by database triggers in the
transaction of every write to that kind's tables (docs/live-pages.md says why triggers and how).

The tables and kinds are frozen here (a later migration that adds a kind adds its triggers); the live
pages' use of them is ``offloading.views.live.KINDS``.

- SQLite: a row trigger per table and event that upserts the kind's counter (writers are serialised by
  SQLite itself; about 1 µs per written row).
- PostgreSQL: a row trigger per table and event only notes the kind in a transaction-local setting
  (no lock, no write; the first one of a transaction also inserts a row in ``liqo_live_pending``);
  that row's deferred constraint trigger bumps every noted kind once, at commit, in the kinds' order.
  The counter rows are thus locked only while the transaction commits, always in the same order:
  concurrent writers of one kind serialise their commits, never their work, and two transactions
  cannot deadlock on the counters.
"""

from typing import Any

from django.db import migrations, models

# table -> kind
TABLES = {
    "offloading_namespace": "namespaces",
    "offloading_clusteroffloading": "offloadings",
    "offloading_cluster": "clusters",
    "offloading_virtualnode": "nodes",
    "offloading_statustransition": "transitions",
    "offloading_changerequest": "changes",
    "offloading_bulkrequest": "bulk",
    "offloading_auditevent": "audit",
    "offloading_pod": "pods",
    "offloading_kubeevent": "events",
    "offloading_alert": "alerts",
    "offloading_snapshotstate": "snapshot",
    "access_scope": "access",
    "auth_user_groups": "access",
}
# The watcher marks the snapshot fresh every few seconds: only these columns of it are page content.
SNAPSHOT_COLUMNS = ("last_error", "local_cluster_id")
EVENTS = ("INSERT", "UPDATE", "DELETE")


def _name(table: str, event: str) -> str:
    return f"liqo_live_{table}_{event.lower()}"


def _sqlite_create() -> list[str]:
    statements = []
    for table, kind in TABLES.items():
        for event in EVENTS:
            when = ""
            if table == "offloading_snapshotstate" and event == "UPDATE":
                when = " WHEN " + " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in SNAPSHOT_COLUMNS)
            statements.append(
                f"CREATE TRIGGER {_name(table, event)} AFTER {event} ON {table} FOR EACH ROW{when} BEGIN "
                f"INSERT INTO offloading_liveversion (kind, version) VALUES ('{kind}', 1) "
                "ON CONFLICT (kind) DO UPDATE SET version = version + 1; END"
            )
    return statements


def _sqlite_drop() -> list[str]:
    return [f"DROP TRIGGER IF EXISTS {_name(table, event)}" for table in TABLES for event in EVENTS]


POSTGRES_FUNCTIONS = [
    # Row trigger: note the kind for this transaction; the first note rings the doorbell.
    """
    CREATE OR REPLACE FUNCTION liqo_live_note() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        noted text := coalesce(current_setting('liqo_live.kinds', true), '');
    BEGIN
        IF noted = '' THEN
            PERFORM set_config('liqo_live.kinds', ',' || TG_ARGV[0] || ',', true);
            INSERT INTO liqo_live_pending DEFAULT VALUES;
        ELSIF position(',' || TG_ARGV[0] || ',' IN noted) = 0 THEN
            PERFORM set_config('liqo_live.kinds', noted || TG_ARGV[0] || ',', true);
        END IF;
        RETURN NULL;
    END $$
    """,
    # Deferred doorbell: at commit, bump every noted kind once, in the kinds' order.
    """
    CREATE OR REPLACE FUNCTION liqo_live_bump() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        noted text := coalesce(current_setting('liqo_live.kinds', true), '');
    BEGIN
        PERFORM set_config('liqo_live.kinds', '', true);
        DELETE FROM liqo_live_pending WHERE id = NEW.id;
        INSERT INTO offloading_liveversion (kind, version)
            SELECT kind, 1 FROM unnest(string_to_array(trim(both ',' FROM noted), ',')) AS kind
            WHERE kind <> '' ORDER BY kind
            ON CONFLICT (kind) DO UPDATE SET version = offloading_liveversion.version + 1;
        RETURN NULL;
    END $$
    """,
    "CREATE TABLE IF NOT EXISTS liqo_live_pending (id bigserial PRIMARY KEY)",
    "CREATE CONSTRAINT TRIGGER liqo_live_pending_bump AFTER INSERT ON liqo_live_pending "
    "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION liqo_live_bump()",
]


def _postgres_create() -> list[str]:
    statements = list(POSTGRES_FUNCTIONS)
    for table, kind in TABLES.items():
        for event in EVENTS:
            when = ""
            if table == "offloading_snapshotstate" and event == "UPDATE":
                when = " WHEN (" + " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in SNAPSHOT_COLUMNS) + ")"
            statements.append(
                f"CREATE TRIGGER {_name(table, event)} AFTER {event} ON {table} FOR EACH ROW{when} "
                f"EXECUTE FUNCTION liqo_live_note('{kind}')"
            )
    return statements


def _postgres_drop() -> list[str]:
    return [
        *(f"DROP TRIGGER IF EXISTS {_name(table, event)} ON {table}" for table in TABLES for event in EVENTS),
        "DROP TABLE IF EXISTS liqo_live_pending",
        "DROP FUNCTION IF EXISTS liqo_live_bump()",
        "DROP FUNCTION IF EXISTS liqo_live_note()",
    ]


def _run(statements: dict[str, Any]) -> Any:
    def run(apps: Any, schema_editor: Any) -> None:
        vendor = schema_editor.connection.vendor
        if vendor not in statements:
            raise RuntimeError(f"live versions: no triggers for the {vendor} database")
        for sql in statements[vendor]():
            schema_editor.execute(sql)

    return run


def _seed(apps: Any, schema_editor: Any) -> None:
    LiveVersion = apps.get_model("offloading", "LiveVersion")
    for kind in sorted(set(TABLES.values())):
        LiveVersion.objects.using(schema_editor.connection.alias).get_or_create(kind=kind)


class Migration(migrations.Migration):
    dependencies = [
        ("offloading", "0012_audit_bulk_requested"),
        ("access", "0003_oidc_identity"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [
        migrations.CreateModel(
            name="LiveVersion",
            fields=[
                ("kind", models.CharField(max_length=32, primary_key=True, serialize=False)),
                ("version", models.BigIntegerField(default=0)),
            ],
        ),
        migrations.RunPython(_seed, migrations.RunPython.noop),
        migrations.RunPython(
            _run({"sqlite": _sqlite_create, "postgresql": _postgres_create}),
            _run({"sqlite": _sqlite_drop, "postgresql": _postgres_drop}),
        ),
    ]
