"""Forms: they parse and normalise input. The rules live in liqo_rules and in the request contract
(``offloading.changes.requests``), which validates a submitted change once; a form puts the contract's
typed refusal (``ChangeRejected``) on the fields it names (:meth:`RefusalFields.add_refusal`)."""

from __future__ import annotations

from typing import Any

from django import forms

from liqo_rules import constants as liqo
from liqo_rules.limits import selector_count_problems
from liqo_rules.selectors.format import format_term
from liqo_rules.selectors.liqoctl import cluster_selector_with_notes
from liqo_rules.selectors.requirements import SelectorError, UnformattableTermError
from liqo_rules.spec import normalize_spec
from offloading.changes.checks import GITOPS_FIELD, gitops_refusal
from offloading.changes.errors import ChangeRejected, Refusal
from offloading.changes.merge import (
    FieldMerge,
    MergeRow,
    choose_message,
    merge_rows,
    read_view,
    readable,
    rebase,
    resolve_choices,
)
from offloading.choices import ChangeAction
from offloading.filtersets import validate_label_selector
from offloading.models import Namespace

# Form field name for each spec field named in a Problem (liqo_rules.validate_spec).
SPEC_FIELD_TO_FORM = {
    "namespaceMappingStrategy": "namespace_mapping_strategy",
    "remoteNamespaceName": "remote_namespace_name",
    "podOffloadingStrategy": "pod_offloading_strategy",
    "clusterSelector": "cluster_selector",
    "namespace": None,
}
# The form field of each field a refusal of the change flow names (spec and API field names); the others
# are form-wide errors.
FIELD_TO_FORM = {
    **SPEC_FIELD_TO_FORM,
    "namespaceSelector": "namespace_selector",
    "confirm": "confirm",
    GITOPS_FIELD: "gitops_override",
}
GITOPS_OVERRIDE_LABEL = "Push it anyway: the GitOps tool may undo it (written in the audit trail)"

MAPPING_HELP = {
    "DefaultName": "<namespace>-<local cluster id>, unique per consumer cluster.",
    "EnforceSameName": "The same name as here; fails on clusters where that namespace already exists.",
    "SelectedName": "A name you choose below, the same on every selected cluster.",
}
POD_HELP = {
    "LocalAndRemote": "Pods may run here and on the selected clusters.",
    "Remote": "Pods run only on the selected clusters.",
    "Local": "Pods stay here; only the namespace and its resources are replicated.",
}


def selector_lines(text: str) -> list[str]:
    """One selector per non-blank line; lines are ORed (each becomes one NodeSelectorTerm)."""
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def selector_text(spec: dict[str, Any] | None) -> str:
    """The cluster selector of a stored spec written back as lines, for editing."""
    terms = ((spec or {}).get("clusterSelector") or {}).get("nodeSelectorTerms") or []
    return "\n".join(format_term(term) for term in terms)


class RefusalFields:
    """Putting a refusal of the change flow on a form: each message on the field it names when the form
    has that field (``refusal_fields``: the API's field name to the form's), otherwise as a form-wide
    error (for example "changed since you loaded it"); ``refusal`` remembers why (a page refused as not
    allowed answers 403)."""

    refusal_fields: dict[str, str | None] = FIELD_TO_FORM
    refusal: Refusal | None = None

    def add_refusal(self, exc: ChangeRejected) -> None:
        self.add_problems(exc.errors)
        self.refusal = exc.refusal

    def add_problems(self, problems: dict[str, list[str]]) -> None:
        """Attach messages keyed by spec or API field (Liqo's validation problems, a refusal) to the
        matching form fields."""
        form: Any = self
        for field, messages in problems.items():
            target = self.refusal_fields.get(field)
            for message in messages:
                form.add_error(target if target in form.fields else None, message)


class SpecForm(RefusalFields, forms.Form):
    """The fields of a NamespaceOffloading spec, parsed into ``self.spec`` by :meth:`build_spec`."""

    namespace_mapping_strategy = forms.ChoiceField(
        label="Namespace mapping strategy",
        choices=[(s, s) for s in liqo.MAPPING_STRATEGIES],
        initial="DefaultName",
        help_text="How the twin namespace is named on the remote clusters. It cannot be changed later.",
    )
    remote_namespace_name = forms.CharField(
        label="Remote namespace name",
        required=False,
        max_length=253,
        help_text="Only with SelectedName. It cannot be changed later.",
    )
    pod_offloading_strategy = forms.ChoiceField(
        label="Pod offloading strategy",
        choices=[(s, s) for s in liqo.POD_STRATEGIES],
        initial="LocalAndRemote",
    )
    cluster_selector = forms.CharField(
        label="Cluster selector",
        required=False,
        widget=forms.Textarea(
            attrs={
                "rows": 3,
                "spellcheck": "false",
                "placeholder": "topology.kubernetes.io/region in (eu-west, eu-south)\n!staging",
            }
        ),
        help_text="liqoctl / kubectl -l syntax. One selector per line; lines are ORed, commas within a line "
        "are ANDed. Leave empty to select every peered cluster.",
    )
    label_namespace = forms.BooleanField(
        label="Label the namespace liqo.io/scheduling-enabled=true first",
        required=False,
        help_text="Pods created before Liqo's controller labels the namespace are then rejected (and retried) "
        "instead of starting unmutated.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spec: dict[str, Any] | None = None
        self.warnings: dict[str, list[str]] = {}
        self.selector_notes: list[str] = []
        # A selector found in the cluster that has no text form (matchFields, say) is kept as it is.
        self.kept_selector: dict[str, Any] | None = None

    def build_spec(self, data: dict[str, Any]) -> dict[str, Any] | None:
        """The spec the fields describe, or None (with the error on the selector field)."""
        if self.kept_selector is not None:
            selector = self.kept_selector
        else:
            lines = selector_lines(data.get("cluster_selector", ""))
            over = selector_count_problems(lines)  # the size of the rest is checked with Liqo's rules
            if over:
                self.add_error("cluster_selector", over)
                return None
            try:
                selector, self.selector_notes = cluster_selector_with_notes(lines)
            except SelectorError as exc:
                self.add_error("cluster_selector", str(exc))
                return None
        spec: dict[str, Any] = {
            "namespaceMappingStrategy": data.get("namespace_mapping_strategy"),
            "podOffloadingStrategy": data.get("pod_offloading_strategy"),
            "clusterSelector": selector,
        }
        if data.get("remote_namespace_name"):
            spec["remoteNamespaceName"] = data["remote_namespace_name"].strip()
        return spec


def _initial_fields(spec: dict[str, Any]) -> dict[str, Any]:
    """The initial values of the spec fields for ``spec``; the selector text is "" when it has none."""
    try:
        text = selector_text(spec)
    except UnformattableTermError:
        text = ""
    return {
        "namespace_mapping_strategy": spec.get("namespaceMappingStrategy", "DefaultName"),
        "remote_namespace_name": spec.get("remoteNamespaceName", ""),
        "pod_offloading_strategy": spec.get("podOffloadingStrategy", "LocalAndRemote"),
        "cluster_selector": text,
    }


class OffloadForm(SpecForm):
    """Offload a namespace, or edit its offloading (then the mapping fields are locked).

    Editing carries the spec the fields were loaded from (``base_spec``). When someone else changed the
    offloading meanwhile the request contract refuses the edit as stale; :meth:`rebased` then gives the
    form again on the current version: the three-way view of each field that differs (``merge``, the
    same rules as the change page, ``offloading.changes.merge``), the fields only one side changed
    already merged, and a mine/theirs choice (``choice_<field>``) for each field both changed.
    """

    expected_generation = forms.IntegerField(required=False, min_value=0, max_value=2**63 - 1, widget=forms.HiddenInput)
    base_spec = forms.JSONField(required=False, widget=forms.HiddenInput)
    merge = forms.JSONField(required=False, widget=forms.HiddenInput)
    # Asked for by the preview (and by a refusal) when the edit is destructive (offloading.whatif.destructive).
    confirm = forms.BooleanField(label="I understand what this deletes: apply it", required=False)
    # Shown when Argo CD or Flux manages the offloading and would undo the edit (changes.requests).
    gitops_override = forms.BooleanField(label=GITOPS_OVERRIDE_LABEL, required=False)

    @property
    def gitops_reason(self) -> str:
        """Who would undo a direct edit of the offloading ("" when nobody)."""
        return gitops_refusal(self.namespace, ChangeAction.OFFLOAD)

    def __init__(self, *args: Any, namespace: Namespace, **kwargs: Any) -> None:
        self.namespace = namespace
        kept = None
        self.stale_message = ""
        # The live preview of the form: a conflicting field without a choice yet is not an error there.
        self.previewing = False
        if namespace.offloaded and "initial" not in kwargs:
            spec = namespace.offloading_spec or {}
            try:
                selector_text(spec)
            except UnformattableTermError:
                kept = spec.get("clusterSelector")
            kwargs["initial"] = {
                **_initial_fields(spec),
                "expected_generation": namespace.offloading_generation,
                "base_spec": spec,
            }
        elif "initial" not in kwargs:
            # 0: "I saw it not offloaded"; if someone offloads it meanwhile, this form is refused.
            kwargs["initial"] = {"expected_generation": 0}
        elif namespace.offloaded:
            try:
                selector_text(namespace.offloading_spec)
            except UnformattableTermError:
                kept = (namespace.offloading_spec or {}).get("clusterSelector")
        super().__init__(*args, **kwargs)
        if namespace.offloaded:
            reason = "Liqo's webhook rejects changing it after creation."
            for name in ("namespace_mapping_strategy", "remote_namespace_name"):
                self.fields[name].disabled = True
                self.fields[name].help_text = f"Locked: {reason}"
            del self.fields["label_namespace"]
        if kept is not None:
            self.kept_selector = kept
            self.fields["cluster_selector"].disabled = True
            self.fields["cluster_selector"].help_text = (
                "Locked: this selector uses matchFields or expressions that have no selector-text form; "
                "it is kept as it is. Edit it with kubectl."
            )

    @property
    def editing(self) -> bool:
        return self.namespace.offloaded

    def _merge_entries(self) -> list[FieldMerge]:
        """The fields of the three-way view this form carries (none when it carries none, or garbage)."""
        return read_view(self["merge"].value())

    @property
    def merge_rows(self) -> list[MergeRow]:
        """The three-way view, a row per field that differs, for the page."""
        labels = {key: str(self.fields[name].label) for key, name in SPEC_FIELD_TO_FORM.items() if name in self.fields}
        choices = {key: str(value) for key, value in self.data.items() if key.startswith("choice_")}
        return merge_rows(self._merge_entries(), labels, SPEC_FIELD_TO_FORM, choices)

    @property
    def merge_conflicts(self) -> list[MergeRow]:
        return [row for row in self.merge_rows if row.conflict]

    def _resolve(self, spec: dict[str, Any]) -> None:
        """Apply the mine/theirs choices of the fields both sides changed to ``spec`` (what the fields
        hold: mine), with the merge's own rules; a conflicting field without a choice is an error on it."""
        choices = {key.removeprefix("choice_"): str(value) for key, value in self.data.items() if key[:7] == "choice_"}
        for name in resolve_choices(self._merge_entries(), spec, choices):
            if self.previewing:
                continue  # the preview shows mine until a choice is made; the three-way view asks for it
            target = SPEC_FIELD_TO_FORM.get(name)
            label = self.fields[target].label if target in self.fields else name
            self.add_error(target if target in self.fields else None, choose_message(str(label)))

    def clean(self) -> dict[str, Any]:
        """Parse the fields into ``spec``, normalised (defaults applied); Liqo's rules are the request
        contract's (the live preview asks them too)."""
        data = super().clean() or {}
        spec = self.build_spec(data)
        if spec is None:
            return data
        self._resolve(spec)
        self.spec = normalize_spec(spec)
        return data

    def rebased(self, namespace: Namespace, message: str) -> OffloadForm:
        """This (valid) form again after the contract refused it as stale, based on ``namespace`` as the
        snapshot holds it now: expected_generation and base_spec are the current ones; when both the
        loaded and the current version are offloadings, the fields take the three-way merge of base (what
        was loaded), theirs (now) and mine (what was submitted), mine for a field both changed (to be
        confirmed by a choice), and the view of every field that differs is carried along."""
        mine = self.spec or {}
        base = self.cleaned_data.get("base_spec")
        generation = namespace.offloading_generation if namespace.offloaded else 0
        if not namespace.offloaded:
            # Unoffloaded since: the offload form, with what was asked for.
            form = OffloadForm(namespace=namespace, initial={**_initial_fields(mine), "expected_generation": 0})
        elif not self.editing or not readable(base):
            # Offloaded by someone else since (or a form that did not say what it was based on): the
            # edit form of the current version.
            form = OffloadForm(namespace=namespace)
        else:
            theirs = namespace.offloading_spec or {}
            spec, view = rebase(base, theirs, mine)
            initial = {**_initial_fields(spec), "expected_generation": generation, "base_spec": theirs, "merge": view}
            form = OffloadForm(namespace=namespace, initial=initial)
            if normalize_spec(spec) == normalize_spec(theirs):
                message += ". Everything you asked for is already there: nothing to change"
        form.stale_message = message
        return form


class UnoffloadForm(RefusalFields, forms.Form):
    """Unoffload a namespace: destructive, so it is confirmed by typing the namespace's name (the request
    contract refuses it unconfirmed, with what it deletes, on ``confirm``)."""

    confirm = forms.CharField(label="Type the namespace name to confirm", max_length=63, required=False)
    expected_generation = forms.IntegerField(required=False, min_value=0, max_value=2**63 - 1, widget=forms.HiddenInput)
    gitops_override = forms.BooleanField(label=GITOPS_OVERRIDE_LABEL, required=False)

    def __init__(self, *args: Any, namespace: Namespace, **kwargs: Any) -> None:
        self.namespace = namespace
        kwargs.setdefault("initial", {"expected_generation": namespace.offloading_generation})
        super().__init__(*args, **kwargs)

    @property
    def gitops_reason(self) -> str:
        """Who would undo (re-create) the offloading if it were deleted directly ("" when nobody)."""
        return gitops_refusal(self.namespace, ChangeAction.UNOFFLOAD)

    def clean_confirm(self) -> str:
        return str(self.cleaned_data.get("confirm") or "").strip()

    @property
    def confirmed(self) -> bool:
        """Whether the name typed is the namespace's."""
        return self.cleaned_data.get("confirm") == self.namespace.name

    def add_refusal(self, exc: ChangeRejected) -> None:
        typed = self.cleaned_data.get("confirm")  # read first: an error on the field drops it
        super().add_refusal(exc)
        if exc.refusal is Refusal.UNCONFIRMED and typed:
            self.add_error("confirm", f'You typed "{typed}": type "{self.namespace.name}" exactly to confirm.')


class BulkForm(SpecForm):
    """Offload or unoffload every namespace matching a label selector."""

    action = forms.ChoiceField(
        choices=[("offload", "Offload (or update) them"), ("unoffload", "Unoffload them")],
        initial="offload",
        widget=forms.RadioSelect,
    )
    namespace_selector = forms.CharField(
        label="Namespace selector",
        max_length=16384,
        validators=[validate_label_selector],
        widget=forms.TextInput(attrs={"placeholder": "team=payments,env in (prod,staging)", "spellcheck": "false"}),
        help_text="kubectl -l syntax, matched against the namespaces' labels.",
    )

    expected_generations = forms.JSONField(required=False, widget=forms.HiddenInput)
    # Typed confirmation (the number of namespaces), asked for by the preview when the change is
    # destructive anywhere (offloading.whatif.destructive); the page confirms when it is that number.
    confirm_count = forms.CharField(required=False, max_length=12)
    # Include the namespaces Argo CD or Flux manages (left out otherwise); audited per change.
    gitops_override = forms.BooleanField(
        label="Include namespaces managed from Git (Argo CD, Flux) and push to them anyway: the GitOps tool may "
        "undo it (written in the audit trail)",
        required=False,
    )
    refusal_fields = {**FIELD_TO_FORM, "confirm": "confirm_count"}

    field_order = ["action", "namespace_selector"]

    def clean_expected_generations(self) -> dict[str, int] | None:
        """The generation of each namespace the preview showed: {"name": generation, ...}."""
        value = self.cleaned_data.get("expected_generations")
        if value in (None, ""):
            return None
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0 for k, v in value.items()
        ):
            raise forms.ValidationError("Reload the preview: the namespaces it showed could not be read back.")
        return value

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("action") == "offload":
            self.spec = self.build_spec(data)
        return data
