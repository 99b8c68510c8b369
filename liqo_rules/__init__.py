"""Pure Liqo / Kubernetes semantics for liqo-dash: no Django, no I/O.

Import the module that holds a rule (``liqo_rules.spec``, ``liqo_rules.status``,
``liqo_rules.selectors.match`` ...); this package re-exports nothing. The layout is listed in
docs/architecture.md.
"""
