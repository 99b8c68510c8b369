"""Which managed cluster a snapshot row belongs to (issue 28): the ``managed`` foreign key every snapshot,
inventory and mapping table carries, and the default cluster's primary key for rows written by code that
names no cluster.

Why the default is filled in at save time (``ManagedClusterKey.pre_save``), from a memo:

* Not a field ``default``: Django calls a default when an instance is *built* (an unsaved Namespace a
  preview builds would cost a query), and the schema editor calls it during migrations, where the real
  ManagedCluster model may not match the table yet. ``pre_save`` runs only when a row is written, for
  ``save()`` and for every object of a ``bulk_create`` alike; ``has_default()`` stays False, so
  migrations never call it, and ``deconstruct`` names a plain ``ForeignKey``, so the migrations hold
  nothing of this module.
* One lookup, not one per row: the default's primary key is memoised (per process once committed, per
  transaction until then), so a bulk_create of 10,000 rows that name no cluster costs at most one query
  more than before.
* A memo that is never wrong for long, nor wrong at all about rows that may vanish:

  - read outside a transaction (autocommit), the row is committed: the memo holds for ``TTL`` seconds
    (another process may make another cluster the default; this process follows within ``TTL``);
  - read inside a transaction, the row may be uncommitted (made by ``ensure_configured`` in that very
    transaction, or in a test's transaction that will be rolled back): the memo is *provisional*, tied
    to a marker registered with ``transaction.on_commit`` on that connection. Django drops the marker
    when the transaction or the savepoint it was registered in rolls back, and runs it at commit, which
    promotes the memo. A provisional memo is used only while its marker is still pending on the
    connection (an O(1) check); otherwise the row is looked up again (once);
  - ``forget_default`` clears it: on post_migrate (``migrate`` and ``flush`` both send it, see
    offloading/apps.py) and whenever a ManagedCluster row is saved or deleted in this process.

With no default row at all (a flushed database), ``ensure_configured`` makes it, as the pages do.

How readers keep to one cluster (stage 2a): explicitly, at each call site. Every snapshot table's
``objects`` is a :class:`ScopedQuerySet`; a reader writes ``Namespace.objects.of(managed)`` (``managed``:
a ManagedCluster, its primary key, or None for the default cluster), which adds ``managed_id = <pk>`` and
costs no query (the pk comes from the memo above). A page or an API view asks :func:`current_managed`
which cluster its request reads: the default one today, the one a cluster switcher picks later (it will
set ``request.managed_pk``). Why not a default manager that filters by itself: the writers, the sweeps,
the admin and the managed-cluster removal page must still see every cluster's rows, Django reads related
objects through ``_base_manager`` (which would ignore such a filter anyway, so a hidden filter would hold
in some paths and not in others), and a fleet-wide view must be able to read all clusters on purpose. An
explicit ``.of()`` is greppable: a query on a snapshot table without it reads every cluster.
"""

from __future__ import annotations

import threading
import time
from typing import Any, TypeAlias, TypeVar

from django.db import connections, models, router, transaction

from offloading.models.managed import ManagedCluster, ensure_configured

# How writers name a cluster: the row, its primary key, or None for the default cluster.
ManagedRef: TypeAlias = ManagedCluster | int | None

TTL = 60.0

_committed: dict[str, tuple[int, float]] = {}  # alias -> (pk, monotonic time it was read)
# .memo: alias -> (pk, marker, its index in the connection's run_on_commit): read inside a transaction
# not yet committed.
_provisional = threading.local()
# Bumped by every forget: a value read before a forget (another thread's, say) is never memoised after it.
_generation = [0]


class _Marker:
    """The on_commit callback of one provisional memo: committing promotes it (unless the memo was
    forgotten meanwhile: the value may be the old default's)."""

    def __init__(self, alias: str, pk: int) -> None:
        self.alias, self.pk, self.generation = alias, pk, _generation[0]

    def __call__(self) -> None:
        if _generation[0] == self.generation:
            _committed[self.alias] = (self.pk, time.monotonic())


def _pending(alias: str, marker: _Marker, index: int) -> bool:
    """Whether ``marker`` still waits for its transaction's commit. O(1): the callbacks registered before
    it are dropped only with it (a rollback drops those of the rolled-back savepoint and every later
    one), so while it is pending it stays at the index it was registered at."""
    waiting = connections[alias].run_on_commit
    return index < len(waiting) and waiting[index][1] is marker


def default_managed_pk() -> int:
    """The primary key of the default managed cluster, from the memo (see the module's docstring)."""
    alias = router.db_for_write(ManagedCluster)
    found = _committed.get(alias)
    if found is not None and time.monotonic() - found[1] < TTL:
        return found[0]
    memo: dict[str, tuple[int, _Marker, int]] = getattr(_provisional, "memo", None) or {}
    held = memo.get(alias)
    if held is not None and _pending(alias, held[1], held[2]):
        return held[0]
    generation = _generation[0]
    pk = ManagedCluster.objects.using(alias).filter(is_default=True).values_list("pk", flat=True).first()
    if pk is None:
        pk = ensure_configured()[0].pk
    connection = connections[alias]
    if connection.in_atomic_block:
        marker = _Marker(alias, pk)
        transaction.on_commit(marker, using=alias)
        memo[alias] = (pk, marker, len(connection.run_on_commit) - 1)
        _provisional.memo = memo
    elif _generation[0] == generation:
        _committed[alias] = (pk, time.monotonic())
    return pk


def _forget() -> None:
    _generation[0] += 1
    _committed.clear()
    _provisional.memo = {}


def forget_default(*args: Any, **kwargs: Any) -> None:
    """Drop the memo (a signal handler: post_migrate, ManagedCluster saved or deleted), now and again when
    the transaction that changed the row commits: another thread may read the old default until then."""
    _forget()
    transaction.on_commit(_forget, using=kwargs.get("using"))


def managed_pk(managed: ManagedRef) -> int:
    """The primary key of ``managed``: a ManagedCluster, its primary key, or None for the default cluster."""
    if managed is None:
        return default_managed_pk()
    if isinstance(managed, ManagedCluster):
        return int(managed.pk)
    return int(managed)


def policy_cluster_name(managed: ManagedRef) -> str | None:
    """The managed cluster's name as ``access.policy.can_change(cluster=...)`` takes it: None for the
    default cluster (no query), its name for another (one query for a primary key)."""
    if managed is None or is_default(managed):
        return None
    if isinstance(managed, ManagedCluster):
        return managed.name
    return ManagedCluster.objects.filter(pk=managed).values_list("name", flat=True).first()


def is_default(managed: ManagedRef) -> bool:
    """Whether ``managed`` names the default cluster: None does; a ManagedCluster row says so itself (no
    query: what runs per cluster in the watcher's lease loop asks it); a primary key is compared with the
    default's (from the memo)."""
    if managed is None:
        return True
    if isinstance(managed, ManagedCluster):
        return bool(managed.is_default)
    return int(managed) == default_managed_pk()


_M = TypeVar("_M", bound=models.Model)


class ScopedQuerySet(models.QuerySet[_M]):
    """The queryset of the snapshot tables: :meth:`of` keeps one managed cluster's rows."""

    def of(self, managed: ManagedRef = None) -> ScopedQuerySet[_M]:
        """The rows of ``managed`` (a ManagedCluster, its pk, or None: the default cluster). No query of its
        own: the default's pk comes from the memo (``default_managed_pk``)."""
        return self.filter(managed_id=managed_pk(managed))


def current_managed(request: Any = None) -> int:
    """The primary key of the managed cluster a request reads: the one its path names
    (``request.managed_pk``, set by ``offloading.switcher.in_cluster`` under ``/m/<name>/``), else the
    default cluster. No query while the memo holds."""
    chosen = getattr(request, "managed_pk", None)
    return int(chosen) if chosen is not None else default_managed_pk()


class ManagedClusterKey(models.ForeignKey):
    """The ``managed`` column of the snapshot tables: a plain foreign key to ManagedCluster (on delete,
    the cluster's rows go with it) whose unset value is the default cluster, filled in when the row is
    written (see the module's docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("to", ManagedCluster)
        kwargs.setdefault("on_delete", models.CASCADE)
        kwargs.setdefault("related_name", "+")
        super().__init__(*args, **kwargs)

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        value = getattr(model_instance, self.attname)
        if value is None:
            value = default_managed_pk()
            setattr(model_instance, self.attname, value)
        return value

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.ForeignKey", args, kwargs


models.signals.post_save.connect(forget_default, sender=ManagedCluster, dispatch_uid="liqo-dash-default-managed-save")
models.signals.post_delete.connect(
    forget_default, sender=ManagedCluster, dispatch_uid="liqo-dash-default-managed-delete"
)
