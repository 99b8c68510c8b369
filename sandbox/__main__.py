"""Command line: `python -m sandbox serve|generate|faults`."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import urllib.request
from pathlib import Path

import yaml

from sandbox import domain, fleet, scenarios
from sandbox.rbac import SERVICE_USER
from sandbox.server import Sandbox


def _wait_for_signal() -> threading.Event:
    stop = threading.Event()

    def handle(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    return stop


def _serve(args: argparse.Namespace) -> int:
    if domain.is_domain(args.scenario):
        return _serve_domain(args)
    sb = Sandbox(
        scenario=args.scenario,
        controller_delay=args.controller_delay,
        port=args.port,
        host=args.host,
        state_file=args.state_file,
        rbac=args.rbac_policy,
    )
    started = time.perf_counter()
    sb.start()
    took = time.perf_counter() - started
    if args.kubeconfig:
        sb.write_kubeconfig(args.kubeconfig)
    if args.service_kubeconfig:
        sb.write_kubeconfig(args.service_kubeconfig, user=SERVICE_USER)
    stop = _wait_for_signal()
    print(f"(started in {took:.2f}s)", file=sys.stderr, flush=True)
    print(f"sandbox listening on {sb.url}", flush=True)
    try:
        stop.wait()
    finally:
        sb.stop()
    return 0


def _serve_domain(args: argparse.Namespace) -> int:
    """Several clusters (sandbox.domain): one port each from --port on, one kubeconfig context each."""
    try:
        dom = domain.Domain(
            args.scenario,
            controller_delay=args.controller_delay,
            port=args.port,
            host=args.host,
            rbac=args.rbac_policy,
            state_file=args.state_file,  # one per cluster: var/state.json -> var/state-rome.json
        )
    except (ValueError, OSError) as exc:
        raise SystemExit(f"--scenario {args.scenario}: {exc}") from None
    started = time.perf_counter()
    dom.start()
    took = time.perf_counter() - started
    if args.kubeconfig:
        dom.write_kubeconfig(args.kubeconfig)
    if args.service_kubeconfig:
        dom.write_kubeconfig(args.service_kubeconfig, user=SERVICE_USER)
    stop = _wait_for_signal()
    print(f"(domain of {len(dom.clusters)} clusters started in {took:.2f}s)", file=sys.stderr, flush=True)
    for name, sb in dom.clusters.items():
        print(f"sandbox {name} listening on {sb.url}", flush=True)
    try:
        stop.wait()
    finally:
        dom.stop()
    return 0


def _context_url(kubeconfig: str, context: str | None) -> str:
    """The server of a kubeconfig's context (its current context when none is named)."""
    document = yaml.safe_load(Path(kubeconfig).read_text()) or {}
    name = context or document.get("current-context")
    contexts = {entry["name"]: entry["context"] for entry in document.get("contexts") or []}
    clusters = {entry["name"]: entry["cluster"] for entry in document.get("clusters") or []}
    if name not in contexts:
        raise SystemExit(f"{kubeconfig}: no context {name!r} ({', '.join(contexts)})")
    return str(clusters[contexts[name]["cluster"]]["server"])


def _generate(args: argparse.Namespace) -> int:
    data = fleet.generate(args.namespaces, args.clusters, offloaded=args.offloaded, seed=args.seed)
    text = fleet.dump(data)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text)
    return 0


def _faults(args: argparse.Namespace) -> int:
    if not args.url and not args.kubeconfig:
        raise SystemExit("give --url, or --kubeconfig (and --context for a domain's cluster)")
    base = args.url or _context_url(args.kubeconfig, args.context)
    url = base.rstrip("/") + "/sandbox/faults"
    if args.clear:
        request = urllib.request.Request(url, method="DELETE")
    elif args.set:
        payload: dict[str, object] = {}
        for item in args.set:
            key, _, value = item.partition("=")
            try:
                payload[key] = json.loads(value)
            except ValueError:
                payload[key] = value  # a bare string such as a cluster id
        request = urllib.request.Request(
            url, data=json.dumps(payload).encode(), method="PATCH", headers={"Content-Type": "application/json"}
        )
    else:
        request = urllib.request.Request(url)
    with urllib.request.urlopen(request, timeout=10) as response:
        print(response.read().decode())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the sandbox API server")
    serve.add_argument("--port", type=int, default=0, help="0 picks a free port")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument(
        "--scenario",
        default="demo",
        help=f"a built-in name ({', '.join(scenarios.builtin_names())}), a YAML file, or a domain of several "
        "clusters: domain:rome,milan,turin:provider, domain:3 or a YAML file with domain: (sandbox/domain.py)",
    )
    serve.add_argument("--kubeconfig", help="write a kubeconfig for the sandbox here (as its admin)")
    serve.add_argument(
        "--service-kubeconfig",
        help=f'write a kubeconfig for the dashboard\'s own identity "{SERVICE_USER}" here (reads, impersonates)',
    )
    serve.add_argument(
        "--controller-delay",
        type=float,
        default=0.0,
        help="seconds the simulated controllers wait before reacting (demo: 1-2)",
    )
    serve.add_argument("--state-file", help="persist the cluster state here and restore it on start")
    serve.add_argument("--rbac-policy", help="YAML RBAC policy (users, tokens, rules); default: built-in")
    serve.set_defaults(func=_serve)

    gen = sub.add_parser("generate", help="write a large generated scenario")
    gen.add_argument("--namespaces", type=int, required=True)
    gen.add_argument("--clusters", type=int, required=True)
    gen.add_argument("--offloaded", type=float, default=0.1, help="fraction of namespaces offloaded")
    gen.add_argument("--seed", type=int, default=42)
    gen.add_argument("-o", "--output", required=True, help="file, or - for stdout")
    gen.set_defaults(func=_generate)

    faults = sub.add_parser("faults", help="show or change the faults of a running sandbox")
    faults.add_argument("--url", help="the sandbox URL, e.g. http://127.0.0.1:8001")
    faults.add_argument("--kubeconfig", help="instead of --url: the server of this kubeconfig's context")
    faults.add_argument("--context", help="with --kubeconfig: the context (a domain's cluster name)")
    faults.add_argument(
        "--set", nargs="*", metavar="KEY=VALUE", help="e.g. latency=0.5 error_rate=0.1 outage=true peer_down=milan"
    )
    faults.add_argument("--clear", action="store_true")
    faults.set_defaults(func=_faults)

    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
