"""A sandbox Kubernetes API server with simulated Liqo, for the demo and the tests.

    from sandbox import Sandbox
    with Sandbox(scenario="demo") as sb:
        sb.write_kubeconfig("/tmp/kubeconfig")
        ...

See sandbox/README.md.
"""

from sandbox.server import Sandbox

__all__ = ["Sandbox"]
