"""HTTP front end of the sandbox: routing, discovery, authn/authz, list/watch, tables, Status bodies and
faults, on the standard library's ThreadingHTTPServer (HTTP/1.1 keep-alive; watches use chunked encoding).

`sandbox.server` wires it: `ApiHTTPServer(address, Api(...), Handler)`. Per request the handler makes an
`Exchange` and hands a resource request to a `ResourceRequest`.

* `context`: `Api` (what every request needs) and the connection-tracking `ApiHTTPServer`.
* `handler`: `Handler` (admin endpoints, in-flight limit, faults, routing).
* `request`: `Exchange`, one request and its response: bodies, objects, tables, watch chunks.
* `authn`: bearer tokens and impersonation.
* `verbs`: `ResourceRequest`, authorization and get / create / update / patch / delete / deletecollection.
* `lists`: list (selectors, pagination); `watches`: watch (bookmarks, initial events).
* `reviews`: (Self)SubjectAccessReviews.
* `query`: label / field selectors and continue tokens.
* `tables`: Tables for `kubectl get`.
* `discovery`: discovery documents, /version, OpenAPI v3, resource URL parsing.
* `traffic`: bytes and requests per client.
"""

from sandbox.api.context import Api, ApiHTTPServer
from sandbox.api.handler import Handler

__all__ = ["Api", "ApiHTTPServer", "Handler"]
