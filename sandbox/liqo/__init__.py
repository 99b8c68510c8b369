"""Simulated Liqo: one module per simulated controller, wired to the sandbox's store; every Liqo rule
(defaults, schema, webhook, naming, selector matching, conditions, phase, roles) comes from
`liqo_rules` (liqo-semantics.md a.5, a.6, b.2, c.1-c.5).

* `context`: what the controllers share (`LiqoContext`, `Peer`, the typed `Mapping` / `Condition`).
* `simulation`: `LiqoSimulation`, which wires admission and the controllers and enqueues work on changes.
* `admission`: CRD defaults + structural schema + the validating webhook.
* `offloading_controller`: the NamespaceOffloading controller.
* `provider`: the provider side of NamespaceMaps (remote namespaces, currentMapping).
* `virtual_nodes`: NamespaceMaps per peer and the virtual Node of each VirtualNode.
* `peers`: ForeignCluster / VirtualNode / Node status as peers go up and down.
* `namespaces`: namespace termination.
* `pods`: places demo pods on local or virtual nodes per the pod strategy.
* `events`: aggregated core/v1 Events.
"""

from sandbox.liqo.context import LiqoContext, Peer
from sandbox.liqo.simulation import LiqoSimulation

__all__ = ["LiqoContext", "LiqoSimulation", "Peer"]
