"""The sandbox's kube-apiserver write path, shared by the HTTP front end and the simulated controllers.

`ApiServer` wires its collaborators over one `Store`, each with one job:

* `admission.Admission`: decoding, defaulting, validation (422) and validating webhooks, with the hooks
  registered per kind;
* `writes.Writer`: create and update (the create and update strategies of `strategy`, managedFields of
  `fields`, resourceVersion preconditions, dry run);
* `patching.Patcher`: merge / JSON / strategic patches (`patch`) and server-side apply (`apply`), finished
  by the writer's update path;
* `deletion.Deleter`: delete with preconditions, finalizers and deletionTimestamp.
"""

from __future__ import annotations

from sandbox.apiserver.admission import Admission
from sandbox.apiserver.deletion import Deleter
from sandbox.apiserver.patching import Patcher
from sandbox.apiserver.writes import Writer
from sandbox.store import Store


class ApiServer:
    """The stateful rules of kube-apiserver on top of `Store`; its verbs are its collaborators' methods."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.admission = Admission()
        writer = Writer(store, self.admission)
        patcher = Patcher(store, writer)
        deleter = Deleter(store)
        self.create = writer.create
        self.update = writer.update
        self.patch = patcher.patch
        self.apply = patcher.apply
        self.delete = deleter.delete
        self.finalize_namespace = deleter.finalize_namespace
