"""Pages and htmx fragments, one module per page family. Every page reads the snapshot; nothing here
calls the Kubernetes API except the optional dry-run before a change is queued."""
