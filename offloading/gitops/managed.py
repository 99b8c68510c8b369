"""Who manages a namespace's offloading from Git, as the snapshot knows it (``Namespace.gitops_facts``),
in the words the pages, the API and the request contract use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from offloading.gitops.detect import ARGOCD, CERTAIN, TOOL_NAMES, Claim, Detection, detect


def detection_of(namespace: Any) -> Detection | None:
    """Detection on the snapshot's facts of the namespace's offloading; None when it has none or no
    GitOps signal is on it."""
    facts = getattr(namespace, "gitops_facts", None)
    if not getattr(namespace, "offloaded", False) or not facts:
        return None
    detection = detect(facts)
    return detection if detection.claims or detection.notes else None


def source_words(claim: Claim) -> str:
    """ "app guestbook" for Argo CD, "Kustomization flux-system/apps" for Flux."""
    if claim.tool == ARGOCD and claim.name:
        return f"app {claim.namespace}/{claim.name}" if claim.namespace else f"app {claim.name}"
    return claim.source


def claim_headline(claim: Claim) -> str:
    lead = "Managed" if claim.confidence == CERTAIN else "Probably managed"
    return f"{lead} by {TOOL_NAMES[claim.tool]} ({source_words(claim)})"


@dataclass(frozen=True)
class Badge:
    """One claim as a page shows it: the headline, how sure, and the evidence (one line per signal)."""

    headline: str
    probable: bool
    evidence: tuple[str, ...]
    notes: tuple[str, ...]

    @property
    def title(self) -> str:
        return "\n".join((*self.evidence, *self.notes))


def badges(detection: Detection | None) -> list[Badge]:
    if detection is None:
        return []
    return [
        Badge(
            headline=claim_headline(claim),
            probable=claim.confidence != CERTAIN,
            evidence=tuple(e.text() + f" ({e.meaning})" for e in claim.evidence),
            notes=claim.notes,
        )
        for claim in detection.claims
    ]


def reverting_claims(detection: Detection | None, deleting: bool) -> list[Claim]:
    """The claims of a tool that would undo a direct push (an edit, or a deletion)."""
    if detection is None or not detection.reverted(deleting):
        return []
    return [
        c
        for c in detection.claims
        if c.confidence == CERTAIN and (c.reverts_delete if deleting else c.reverts_edit) is not False
    ]


def who(detection: Detection | None, deleting: bool) -> str:
    """The managers that would undo a direct push, in words ("" when none)."""
    return "; ".join(claim_headline(c) for c in reverting_claims(detection, deleting))
