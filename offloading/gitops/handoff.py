"""The GitOps hand-off: a change (or a bulk's changes) committed to the configured Git repository on a
new branch, and the commit written to the audit trail.

The steps, for a change or a bulk:

1. :func:`of_change` / :func:`of_bulk`: what is handed off (the changes, one per namespace, the latest
   of a retried bulk) as the overlay of ``offloading.gitops.files``. The caller then checks who asks
   (the interface asks ``offloading.changes.authorize`` of every namespace of :attr:`HandOff.changes`
   before anything reaches Git).
2. :func:`hand_off`: the repository of ``settings.LIQO_DASH_GITOPS``, checked; the commit of
   ``offloading.gitops.repo`` (authored by the changes' requester, with the change ids and the
   approvals in its message); then the ``handed_off`` audit row, whose ``after`` holds the repository
   URL (without credentials), the branch, the commit's sha, the directory and the files.

The Git work runs in the request, bounded: every git command has a timeout (``TIMEOUT`` of the
settings, :data:`DEFAULT_TIMEOUT` seconds by default) and a hand-off makes three network calls
(``ls-remote``, a one-commit-deep ``fetch`` and a ``push``), so it ends, or fails with a typed
``repo.GitOpsError``, within three timeouts. The answer is the commit itself, so the caller gets the sha
at once; the repository refuses a second push of the same branch, so two hand-offs of the same changes
at the same time cannot both land. No database transaction is held while git runs.

Managed clusters (issue 28): a change of another cluster than the default is written under that cluster's
directory (:func:`cluster_directory`, ``files.ChangeFiles.cluster``) and audited under it, a bulk's too.

Approvals: ``approvals`` of :func:`hand_off` (None: ask :func:`approvals_for`, which knows none today).
The governance flow (issue 29) fills that hook in; a hand-off without approvals says "Approvals: none".
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings as django_settings
from django.contrib.auth import get_user_model

from offloading.audit.events import record
from offloading.choices import AuditAction
from offloading.context import Actor
from offloading.gitops import repo
from offloading.gitops.files import ChangeFiles, FileChange, FilesError, change_files
from offloading.gitops.managed import claim_headline, detection_of
from offloading.models import AuditEvent, BulkRequest, ChangeRequest, Namespace
from offloading.models.fleet import policy_cluster_name

logger = logging.getLogger(__name__)

# Seconds each git command may take (three of them reach the server).
DEFAULT_TIMEOUT = 20.0
OUTCOME = "committed"


@dataclass(frozen=True)
class HandOff:
    """What is handed off: the changes (one per namespace), their overlay, whose changes they are, and the
    bulk they come from (None: a single change)."""

    changes: tuple[ChangeRequest, ...]
    files: ChangeFiles
    requester: str
    requester_id: int | None
    bulk: BulkRequest | None = None

    @property
    def change_ids(self) -> list[int]:
        return list(self.files.change_ids)

    def namespaces(self) -> list[tuple[Namespace, ChangeRequest]]:
        """Each namespace handed off with its change, for the access check: the snapshot's namespace, or
        one known by its name alone when the snapshot no longer has it (its labels unknown)."""
        names = [change.namespace for change in self.changes]
        managed = self.changes[0].managed_id if self.changes else None  # one change's or bulk's: one cluster
        known = {ns.name: ns for ns in Namespace.objects.of(managed).filter(name__in=names)}
        return [
            (known.get(ch.namespace) or Namespace(managed_id=ch.managed_id, name=ch.namespace, labels={}), ch)
            for ch in self.changes
        ]

    def managed_by(self) -> dict[str, str]:
        """The namespaces handed off whose offloading Argo CD or Flux manages, with who (the page's words):
        the ones for which the hand-off is the way to go, as a direct push would be undone."""
        found = {}
        for namespace, _change in self.namespaces():
            detection = detection_of(namespace)
            if detection is not None and detection.claims:
                found[namespace.name] = "; ".join(claim_headline(claim) for claim in detection.claims)
        return found

    @property
    def what(self) -> str:
        if self.bulk is not None:
            return f"bulk #{self.bulk.pk}"
        return f"change #{self.changes[0].pk}"


@dataclass(frozen=True)
class Commit:
    """Where a hand-off landed (the API's answer and the audit row's details)."""

    repository: str
    branch: str
    sha: str
    base_branch: str
    base_sha: str
    path: str
    files: tuple[str, ...]
    change_ids: tuple[int, ...]
    bulk: int | None
    audit_seq: int | None = None
    # namespace -> who manages its offloading from Git (only those that are)
    managed_by: tuple[tuple[str, str], ...] = ()

    def details(self) -> dict[str, Any]:
        """The ``after`` of the ``handed_off`` audit row (camelCase, as the API answers)."""
        found: dict[str, Any] = {
            "repository": self.repository,
            "branch": self.branch,
            "sha": self.sha,
            "baseBranch": self.base_branch,
            "baseSha": self.base_sha,
            "path": self.path,
            "files": list(self.files),
            "changeIds": list(self.change_ids),
        }
        if self.bulk is not None:
            found["bulk"] = self.bulk
        if self.managed_by:
            found["managedBy"] = dict(self.managed_by)
        return found

    @classmethod
    def from_event(cls, event: AuditEvent) -> Commit:
        after = event.after if isinstance(event.after, dict) else {}
        return cls(
            repository=str(after.get("repository", "")),
            branch=str(after.get("branch", "")),
            sha=str(after.get("sha", "")),
            base_branch=str(after.get("baseBranch", "")),
            base_sha=str(after.get("baseSha", "")),
            path=str(after.get("path", "")),
            files=tuple(str(f) for f in after.get("files") or ()),
            change_ids=tuple(int(i) for i in after.get("changeIds") or ()),
            bulk=after.get("bulk"),
            audit_seq=event.seq,
            managed_by=tuple((str(k), str(v)) for k, v in (after.get("managedBy") or {}).items()),
        )


def latest_per_namespace(changes: Iterable[ChangeRequest]) -> list[ChangeRequest]:
    """One change per namespace (a retried bulk holds several): the latest, by id."""
    latest: dict[str, ChangeRequest] = {}
    for change in sorted(changes, key=lambda ch: ch.pk):
        latest[change.namespace] = change
    return sorted(latest.values(), key=lambda ch: ch.pk)


def cluster_directory(managed: int | None) -> str:
    """The directory of managed cluster ``managed``'s overlays (under the configured path): its name, ""
    for the default cluster (whose overlays keep the place they had before there were several)."""
    return policy_cluster_name(managed) or ""


def of_change(change: ChangeRequest) -> HandOff:
    """The hand-off of one change (raises ``FilesError`` when it cannot be written as files)."""
    cluster = cluster_directory(change.managed_id)
    files = change_files([FileChange.of(change)], requester=change.requester_name, cluster=cluster)
    return HandOff((change,), files, change.requester_name, change.requester_id)


def of_bulk(bulk: BulkRequest) -> HandOff:
    """The hand-off of a bulk: its changes, the latest per namespace, as one overlay."""
    changes = latest_per_namespace(bulk.changes.all())
    if not changes:
        raise FilesError(f"bulk request {bulk.pk} has no change to write")
    cluster = cluster_directory(bulk.managed_id)
    files = change_files([FileChange.of(ch) for ch in changes], requester=bulk.requester_name, cluster=cluster)
    return HandOff(tuple(changes), files, bulk.requester_name, bulk.requester_id, bulk)


def approvals_for(changes: Sequence[ChangeRequest]) -> tuple[repo.Approval, ...]:
    """The approvals the commit message names when the caller gives none: none. The pages and the API
    give the governance flow's decisions (``offloading.governance.decisions.handoff_approvals``; that
    flow sits above this package, which cannot read it)."""
    return ()


def repo_settings(values: Mapping[str, Any] | None = None) -> repo.RepoSettings:
    """The configured repository (``settings.LIQO_DASH_GITOPS``), checked: ``repo.NotConfigured`` names
    LIQO_DASH_GITOPS_REPO_URL when there is none, ``repo.ConfigInvalid`` says what is wrong."""
    values = dict(getattr(django_settings, "LIQO_DASH_GITOPS", {}) if values is None else values)
    found = repo.RepoSettings.from_mapping(values)
    try:
        timeout = float(values.get("TIMEOUT") or DEFAULT_TIMEOUT)
    except (TypeError, ValueError):
        raise repo.ConfigInvalid("LIQO_DASH_GITOPS_TIMEOUT must be a number of seconds") from None
    return dataclasses.replace(found, timeout=timeout if timeout > 0 else DEFAULT_TIMEOUT)


def configured() -> repo.RepoSettings | None:
    """The configured repository, or None when there is none or it is not valid (for pages)."""
    try:
        return repo_settings()
    except repo.GitOpsError:
        return None


def _author_email(user_id: int | None) -> str:
    if user_id is None:
        return ""
    user = get_user_model().objects.filter(pk=user_id).first()
    return str(getattr(user, "email", "") or "")


def hand_off(
    handoff: HandOff,
    actor: Actor,
    *,
    approvals: Sequence[repo.Approval] | None = None,
    settings: repo.RepoSettings | None = None,
) -> Commit:
    """Commit ``handoff`` on a new branch of the configured repository and write the ``handed_off``
    audit row; raises ``repo.GitOpsError`` (nothing is recorded then). The commit is authored by the
    changes' requester; when someone else hands them off, the message says who."""
    config = settings if settings is not None else repo_settings()
    files = handoff.files
    if actor.user_name and actor.user_name != handoff.requester:
        files = dataclasses.replace(files, notes=(*files.notes, f"Handed off to Git by {actor.user_name}"))
    given = tuple(approvals) if approvals is not None else approvals_for(handoff.changes)
    result = repo.commit(
        files, config, requester=handoff.requester, approvals=given, author_email=_author_email(handoff.requester_id)
    )
    commit = Commit(
        repository=result.url,
        branch=result.branch,
        sha=result.sha,
        base_branch=result.base_branch,
        base_sha=result.base_sha,
        path=result.directory,
        files=tuple(sorted(files.under(config.path))),
        change_ids=files.change_ids,
        bulk=handoff.bulk.pk if handoff.bulk is not None else None,
        managed_by=tuple(sorted(handoff.managed_by().items())),
    )
    single = handoff.changes[0] if handoff.bulk is None else None
    event = record(
        actor,
        AuditAction.HANDED_OFF,
        single.namespace if single is not None else "",
        outcome=OUTCOME,
        change=single,
        managed=handoff.bulk.managed_id if handoff.bulk is not None else None,  # a single change's: its own
        after=commit.details(),
        message=f"Handed off {handoff.what} to Git: commit {result.sha[:12]} on branch {result.branch} "
        f"of {result.url} ({result.directory}/)",
    )
    logger.info("gitops: %s handed off %s as %s", actor.user_name, handoff.what, result.sha)
    return dataclasses.replace(commit, audit_seq=event.seq)


def commits_of_change(change: ChangeRequest) -> list[Commit]:
    """The hand-offs of a change, newest first."""
    events = AuditEvent.objects.filter(action=AuditAction.HANDED_OFF, change=change).order_by("-seq")
    return [Commit.from_event(e) for e in events]


def commits_of_bulk(bulk: BulkRequest) -> list[Commit]:
    """The hand-offs of a bulk, newest first."""
    events = AuditEvent.objects.filter(action=AuditAction.HANDED_OFF, change=None, after__bulk=bulk.pk)
    return [Commit.from_event(e) for e in events.order_by("-seq")]
