"""Migration tests: the database taken back to a migration for the test, and forward again after."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.core.management.sql import emit_post_migrate_signal
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from offloading.models import livetriggers


def back_to(target: tuple[str, str]) -> Iterator[Any]:
    """Migrate to ``target``, yield its apps (the models as they were then), then migrate forward to every
    leaf again and send post_migrate (the live triggers and the role groups are made again). For a
    fixture on ``transactional_db``."""
    executor = MigrationExecutor(connection)
    leaves = executor.loader.graph.leaf_nodes("offloading")
    executor.migrate([target])
    # What `migrate` does after it (post_migrate): the live triggers for the tables as they are then (on
    # PostgreSQL the per-cluster ones would still name a managed column the migrations just dropped).
    livetriggers.install(connection)
    yield executor.loader.project_state([target]).apps
    MigrationExecutor(connection).migrate(leaves)
    emit_post_migrate_signal(0, False, connection.alias)
