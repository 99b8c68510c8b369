"""python -m bench [--quick] [--fleet 1000x20 ...] [--repeat N] [--json FILE]

Prints the figures of every fleet and their ratio (biggest / smallest fleet), then the problems the
figures point at. Exits 0 whatever the times are; non-zero only when a benchmark could not run."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench import FLEETS, harness

# The parts of a run --only can select ("pages": the fleets' refresh and pages, and the cold renders).
RUNS = ("pages", "sync", "pods", "domain", "recovery", "throughput", "viewers")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[1])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="reduced size for CI: fleets "
        + ", ".join(f"{n}x{c}" for n, c in FLEETS[:2])
        + ", shorter windows, 100 offloads",
    )
    parser.add_argument(
        "--fleet",
        action="append",
        type=harness.fleet_size,
        metavar="NSxCLUSTERS",
        help="a fleet to measure (repeatable); default: " + ", ".join(f"{n}x{c}" for n, c in FLEETS),
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=15,
        help="rounds of timed runs of every page on every fleet (median shown); default 15",
    )
    parser.add_argument(
        "--no-mass-change",
        dest="mass_change",
        action="store_false",
        help="skip the refresh after every Ready offloading changed status (the slowest step)",
    )
    parser.add_argument(
        "--no-recovery",
        dest="recovery",
        action="store_false",
        help="skip the recovery runs (a bulk through an API server outage and a 5xx storm)",
    )
    parser.add_argument(
        "--json",
        metavar="FILE",
        nargs="?",
        const="-",
        help="also write every figure as one JSON object (to FILE; without FILE: to stdout, the table to stderr)",
    )
    parser.add_argument(
        "--no-sync",
        dest="sync",
        action="store_false",
        help="skip the informer-style sync run (watcher process on the biggest fleet)",
    )
    parser.add_argument(
        "--no-pods",
        dest="pods",
        action="store_false",
        help="skip the pods run (2 pods in every namespace of the biggest fleet, followed by the watcher)",
    )
    parser.add_argument(
        "--no-domain",
        dest="domain",
        action="store_false",
        help="skip the managed-cluster fleet run (a sandbox domain of 10 clusters of 1,000/20, the watcher "
        "managing all, against one cluster of 10,000/20; bench/domain.py)",
    )
    parser.add_argument(
        "--no-throughput",
        dest="throughput",
        action="store_false",
        help="skip the bulk against kubectl apply run (and the worker's memory and the list against kubectl get)",
    )
    parser.add_argument(
        "--no-cold", dest="cold", action="store_false", help="skip the cold renders (a process per page)"
    )
    parser.add_argument(
        "--no-viewers",
        dest="viewers",
        action="store_false",
        help="skip the viewers run (open live pages polling one gunicorn web pod while nothing changes)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (database, logs)")
    parser.add_argument(
        "--only",
        action="append",
        choices=RUNS,
        metavar="RUN",
        help="run only this part (repeatable): " + ", ".join(RUNS) + "; e.g. --only throughput",
    )
    args = parser.parse_args(argv)
    if args.only:
        for run in RUNS:
            setattr(args, run, run in args.only)
    fleets = args.fleet or (list(FLEETS[:2]) if args.quick else list(FLEETS))

    scratch = harness.Run("liqo-dash-bench-")
    var_dir, log = scratch.var_dir, scratch.log
    try:
        harness.setup_django(var_dir)
        from bench import measures, report

        # The pages first, then the sync (whose figures include the sandbox's start), on a quiet machine:
        # after the recovery and throughput runs the machine is still freeing the gigabytes their sandboxes
        # and workers held, and what was measured then was up to 2x slower than alone.
        results = []
        for index, (namespaces, clusters) in enumerate(fleets if getattr(args, "pages", True) else []):
            log(f"fleet {namespaces} namespaces / {clusters} clusters")
            results.append(
                measures.measure_fleet(
                    namespaces,
                    clusters,
                    var_dir,
                    mass_change=args.mass_change,
                    log=log,
                    cold=args.cold and index == len(fleets) - 1,
                )
            )
        if results:
            measures.measure_side_by_side(results, max(1, args.repeat))
            log(f"pages and previews measured side by side, {max(1, args.repeat)} rounds")
        harness.reset_database()
        synced: dict[str, object] = {}
        if args.sync:
            from bench import sync

            namespaces, clusters = fleets[-1]
            steady_s, samples = (20.0, 20) if args.quick else (60.0, 40)
            synced = sync.measure(
                namespaces, clusters, var_dir, steady_s, samples, log, bulk=100 if args.quick else 1000
            )
        followed: dict[str, object] = {}
        if args.pods:
            from bench import pods

            namespaces, clusters = fleets[-1]
            followed = pods.measure(
                namespaces, clusters, 2, 20 if args.quick else 100, var_dir, log, steady_s=20.0 if args.quick else 60.0
            )
        fleetwide: dict[str, object] = {}
        if args.domain:
            from bench import domain

            clusters, namespaces, peers = domain.QUICK if args.quick else domain.FULL
            fleetwide = domain.measure(
                clusters,
                namespaces,
                peers,
                var_dir,
                log,
                samples=12 if args.quick else 40,
                steady_s=10.0 if args.quick else 30.0,
            )
        recovered = []
        if args.recovery:
            from bench import recovery

            harness.reset_database()  # the sync and pods runs leave their fleets in the snapshot
            size, outage_s, storm_s = (30, 10.0, 10.0) if args.quick else (300, 45.0, 60.0)
            recovered = recovery.measure(var_dir, size, outage_s, storm_s, log)
            for item in recovered:
                log(item.line())
            reset_database = harness.reset_database
            reset_database()
        moved = None
        if args.throughput:
            from bench import throughput

            moved = throughput.measure(var_dir, 100 if args.quick else 1000, log)
            for line in moved.lines():
                log(line)  # now, in case what follows fails
            reset_database = harness.reset_database
            reset_database()
        watched: dict[str, object] = {}
        if args.viewers:
            from bench import viewers

            # A small fleet and 50 / 200 viewers with --quick; otherwise the biggest fleet with 50, 200, 500.
            namespaces, clusters = fleets[min(1, len(fleets) - 1)] if args.quick else fleets[-1]
            counts, window_s = ([50, 200], 10.0) if args.quick else ([50, 200, 500], 30.0)
            # Each bulk window pools 3 bulks of 100 (1 with --quick): a single bulk's 1-3 s hold too few polls.
            repeats = 1 if args.quick else 3
            watched = viewers.measure(namespaces, clusters, var_dir, counts, window_s, log, repeats=repeats)
            harness.reset_database()
        elapsed = scratch.elapsed()
        if args.json == "-":
            sys.stdout = sys.stderr  # the readable report goes to stderr, stdout holds only the JSON
        print()
        print(
            "liqo-dash bench: SQLite in a temporary directory, sandbox API server in its own process; "
            "wall times are this machine's, compare the ratios"
        )
        if results:
            print(report.table(results))
        if recovered:
            print(
                "\nRecovery from API server faults (real worker and beat on Redis, sandbox over HTTP, 50 ms latency):"
            )
            for item in recovered:
                print("  " + item.line())
        problems = report.flags(results)
        print(f"\nFLAGS ({len(problems)}):" if problems else "\nFLAGS: none")
        for problem in problems:
            print(f"  - {problem}")
        if synced:
            print()
            print("\n".join(sync.lines(synced)))
        if followed:
            print()
            print("\n".join(pods.lines(followed)))
        if fleetwide:
            print()
            print("\n".join(domain.lines(fleetwide)))
        if moved is not None:
            print()
            print("\n".join(moved.lines()))
        if watched:
            print()
            print("\n".join(viewers.lines(watched)))
        figures = report.goals(results, synced, moved.as_dict() if moved else None)
        print()
        print("\n".join(report.goal_lines(figures)))
        print(f"\n(total {elapsed:.0f} s)")
        if args.json:
            summary = report.summary(results, elapsed)
            summary.update(figures)
            summary["runs"] = [run for run in RUNS if getattr(args, run, True)]
            summary["pods"] = followed
            summary["viewers"] = watched
            summary["domain"] = fleetwide
            summary["recovery"] = (
                [{**item.__dict__, "meets_goal": item.meets, "goal_s": recovery.GOAL_S} for item in recovered]
                if recovered
                else []
            )
            if args.json == "-":
                sys.stdout = sys.__stdout__
                print(json.dumps(summary))
            else:
                Path(args.json).write_text(json.dumps(summary, indent=2))
    finally:
        scratch.end(args.keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
