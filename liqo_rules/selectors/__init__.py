"""Kubernetes label selectors and NodeSelectors exactly as apimachinery and component-helpers, and
liqoctl's --selector grammar. One module per job: labels, requirements, parse, match, format, liqoctl.
See shared/docs/selector-semantics.md and liqo-semantics.md c.5.
"""
