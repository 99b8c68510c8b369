"""The database triggers that bump ``LiveVersion`` (docs/live-pages.md), installed after every
``migrate`` (and ``flush``) by a post_migrate handler (offloading/apps.py).

Why after every migrate, not only in migration 0013: on SQLite, a later migration that alters a table
(``AddField``, ``AlterField`` ...) rebuilds it (new table, copy, drop, rename), and the rebuild drops
the table's triggers; a table added later needs its triggers too. Installing is idempotent (drop if
exists, create) and covers every table of ``TABLES`` that exists.

- SQLite: a row trigger per table and event upserts the kind's counter (writers are serialised by
  SQLite itself), and, on a table of one managed cluster's rows (``PER_CLUSTER``), that cluster's
  counter ``kind@<managed pk>`` beside it (issue 28: a page of one cluster polls its cluster's counter,
  a page across the fleet the kind's).
- PostgreSQL: a row trigger per table and event only notes the kind in a transaction-local setting
  (no lock, no write; the first note of a transaction inserts a row in ``liqo_live_pending``); that
  row's deferred constraint trigger bumps every noted kind once, at commit, in the kinds' order: the
  counters are locked only while a transaction commits, always in the same order.
"""

from __future__ import annotations

from typing import Any

# table -> kind (offloading.views.live.KINDS); every table a live region reads is here.
TABLES = {
    "offloading_namespace": "namespaces",
    "offloading_clusteroffloading": "offloadings",
    "offloading_cluster": "clusters",
    "offloading_virtualnode": "nodes",
    "offloading_statustransition": "transitions",
    "offloading_changerequest": "changes",
    "offloading_bulkrequest": "bulk",
    # a change's approval and schedule (governance) are part of what its pages show (its state, when it
    # applies); they name no managed cluster (only their change does), so their kind has no per-cluster
    # counter
    "offloading_approval": "governance",
    "offloading_schedule": "governance",
    "offloading_auditevent": "audit",
    "offloading_pod": "pods",
    "offloading_kubeevent": "events",
    "offloading_alert": "alerts",
    "offloading_snapshotstate": "snapshot",
    "offloading_peernamespacemap": "mappings",
    "offloading_mappingentry": "mappings",
    "offloading_liqoresource": "resources",
    "access_scope": "access",
    "auth_user_groups": "access",
}
# Not page content, but what a poll answered early trusts of its sender: a counter that moves whenever a
# session, a user or a group is written (a login, a logout, a password, a deactivation, a group renamed),
# so that offloading.middleware may remember who sends a poll until it moves (the groups a user is in,
# and the scopes, are "access" above). Never part of a region's ETag.
IDENTITY_TABLES = {
    "django_session": "sessions",
    "auth_user": "sessions",
    "auth_group": "sessions",
}
COUNTED = {**TABLES, **IDENTITY_TABLES}
# The tables of one managed cluster's rows (their ``managed_id`` column, never null): a write also bumps
# ``kind@<managed pk>`` of the cluster the row belongs to (both clusters' when an update moves a row).
# The kinds of the others (access, governance, sessions) have only their global counter.
PER_CLUSTER = frozenset(table for table, kind in TABLES.items() if kind not in ("access", "governance"))
MANAGED_COLUMN = "managed_id"
# Tables that are not page content: the counters themselves, the audit chain's head and checkpoints.
# The managed clusters' list does not poll (issue 28: a beat task refreshes it every 60 s).
NOT_SHOWN = (
    "offloading_liveversion",
    "offloading_auditchainhead",
    "offloading_auditcheckpoint",
    "offloading_managedcluster",
)
# The watcher marks the snapshot fresh every few seconds: only these columns of it are page content.
SNAPSHOT_COLUMNS = ("last_error", "local_cluster_id")
EVENTS = ("INSERT", "UPDATE", "DELETE")


def trigger_name(table: str, event: str) -> str:
    return f"liqo_live_{table}_{event.lower()}"


def _when(table: str, event: str, vendor: str) -> str:
    if table != "offloading_snapshotstate" or event != "UPDATE":
        return ""
    if vendor == "sqlite":
        return " WHEN " + " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in SNAPSHOT_COLUMNS)
    return " WHEN (" + " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in SNAPSHOT_COLUMNS) + ")"


def cluster_kind(kind: str, managed: int) -> str:
    """The counter of ``kind`` in the managed cluster ``managed`` (its primary key)."""
    return f"{kind}@{managed}"


def _sqlite_kinds(table: str, event: str, managed: frozenset[str]) -> str:
    """The kinds a row trigger of ``table`` bumps, as a SELECT of one column: the kind, and on a table of
    ``managed`` (those of ``PER_CLUSTER`` that have their managed column) the row's cluster's (the old row's and the new row's for an update: UNION keeps one
    when they are the same)."""
    kind = COUNTED[table]
    selects = [f"SELECT '{kind}' AS kind"]
    if table in managed:
        rows = {"INSERT": ("NEW",), "UPDATE": ("NEW", "OLD"), "DELETE": ("OLD",)}[event]
        selects += [f"SELECT '{kind}@' || {row}.{MANAGED_COLUMN}" for row in rows]
    return " UNION ".join(selects)


def sqlite_statements(tables: list[str], managed: frozenset[str] = PER_CLUSTER) -> list[str]:
    statements = []
    for table in tables:
        for event in EVENTS:
            name = trigger_name(table, event)
            statements.append(f"DROP TRIGGER IF EXISTS {name}")
            # (WHERE true: SQLite's upsert after a SELECT needs it to parse ON CONFLICT as the upsert's)
            statements.append(
                f"CREATE TRIGGER {name} AFTER {event} ON {table} FOR EACH ROW{_when(table, event, 'sqlite')} "
                f"BEGIN INSERT INTO offloading_liveversion (kind, version) "
                f"SELECT kind, 1 FROM ({_sqlite_kinds(table, event, managed)}) WHERE true "
                "ON CONFLICT (kind) DO UPDATE SET version = version + 1; END"
            )
    return statements


POSTGRES_SETUP = [
    """
    CREATE OR REPLACE FUNCTION liqo_live_noted(kind text) RETURNS void LANGUAGE plpgsql AS $$
    DECLARE
        noted text := coalesce(current_setting('liqo_live.kinds', true), '');
    BEGIN
        IF noted = '' THEN
            PERFORM set_config('liqo_live.kinds', ',' || kind || ',', true);
            INSERT INTO liqo_live_pending DEFAULT VALUES;
        ELSIF position(',' || kind || ',' IN noted) = 0 THEN
            PERFORM set_config('liqo_live.kinds', noted || kind || ',', true);
        END IF;
    END $$
    """,
    """
    CREATE OR REPLACE FUNCTION liqo_live_note() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM liqo_live_noted(TG_ARGV[0]);
        RETURN NULL;
    END $$
    """,
    # On a table of PER_CLUSTER: the kind and the row's cluster's counter (the old row's and the new row's
    # for an update). PL/pgSQL compiles a trigger function per table, so NEW.managed_id is each table's.
    """
    CREATE OR REPLACE FUNCTION liqo_live_note_managed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM liqo_live_noted(TG_ARGV[0]);
        IF TG_OP <> 'DELETE' THEN
            PERFORM liqo_live_noted(TG_ARGV[0] || '@' || NEW.managed_id);
        END IF;
        IF TG_OP <> 'INSERT' THEN
            PERFORM liqo_live_noted(TG_ARGV[0] || '@' || OLD.managed_id);
        END IF;
        RETURN NULL;
    END $$
    """,
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
    "DROP TRIGGER IF EXISTS liqo_live_pending_bump ON liqo_live_pending",
    "CREATE CONSTRAINT TRIGGER liqo_live_pending_bump AFTER INSERT ON liqo_live_pending "
    "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION liqo_live_bump()",
]


def postgres_statements(tables: list[str], managed: frozenset[str] = PER_CLUSTER) -> list[str]:
    statements = list(POSTGRES_SETUP)
    for table in tables:
        for event in EVENTS:
            name = trigger_name(table, event)
            statements.append(f"DROP TRIGGER IF EXISTS {name} ON {table}")
            note = "liqo_live_note_managed" if table in managed else "liqo_live_note"
            statements.append(
                f"CREATE TRIGGER {name} AFTER {event} ON {table} FOR EACH ROW{_when(table, event, 'postgresql')} "
                f"EXECUTE FUNCTION {note}('{COUNTED[table]}')"
            )
    return statements


def install(connection: Any) -> list[str]:
    """(Re)create the triggers of every table of ``COUNTED`` that exists; returns those tables."""
    from django.db import transaction

    existing = set(connection.introspection.table_names())
    if "offloading_liveversion" not in existing:  # migrated back before 0013
        return []
    tables = [table for table in COUNTED if table in existing]
    # A table of PER_CLUSTER counts per cluster once it has its managed column (not when migrated back).
    with connection.cursor() as cursor:
        managed = frozenset(
            table
            for table in tables
            if table in PER_CLUSTER
            and MANAGED_COLUMN in {c.name for c in connection.introspection.get_table_description(cursor, table)}
        )
    build = {"sqlite": sqlite_statements, "postgresql": postgres_statements}.get(connection.vendor)
    if build is None:
        raise RuntimeError(f"live versions: no triggers for the {connection.vendor} database")
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        for sql in build(tables, managed):
            cursor.execute(sql)
    return tables


def ensure(sender: Any = None, using: str = "default", **kwargs: Any) -> None:
    """post_migrate: the triggers after every migrate and flush."""
    from django.db import connections

    install(connections[using])
