"""Pure Liqo / Kubernetes semantics for liqo-dash: no Django, no I/O.

Import the module that holds a rule (``offloading.liqo.spec``, ``offloading.liqo.status``,
``offloading.liqo.selectors.match`` ...); this package re-exports nothing. The layout is listed in
docs/architecture.md.
"""
