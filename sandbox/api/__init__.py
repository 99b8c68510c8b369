"""HTTP front end of the sandbox: routing, discovery, authn/authz, list/watch, tables, Status bodies and
faults, on the standard library's ThreadingHTTPServer (HTTP/1.1 keep-alive; watches use chunked encoding).

* `context`: `Api` (what every request needs) and the connection-tracking HTTP server base.
* `request`: reading bodies, writing responses, objects, tables and watch chunks.
* `handler`: `Handler` (admin endpoints, faults, authentication, routing) and `SandboxHTTPServer`.
* `verbs`: authorization and get/create/update/patch/delete/deletecollection.
* `listwatch`: list (selectors, pagination) and watch (bookmarks, initial events).
* `reviews`: (Self)SubjectAccessReviews.
* `query`: label / field selectors and continue tokens.
* `tables`: Tables for `kubectl get`.
* `discovery`: discovery documents, /version, OpenAPI v3, resource URL parsing.
"""

from sandbox.api.context import Api
from sandbox.api.handler import Handler, SandboxHTTPServer

__all__ = ["Api", "Handler", "SandboxHTTPServer"]
