"""Benchmarks of liqo-dash on generated fleets (``python -m bench``, ``make bench``).

They print counts (Kubernetes LIST calls, SQL queries) and wall-clock times with their ratios between
fleet sizes; they never fail on a time. Counts that should not grow with the fleet (LIST pages beyond
one per 500 items, page queries) are flagged in the report, not turned into an exit status, except
when a benchmark cannot run at all.

Everything runs in this process: a throwaway SQLite database in a temporary directory, the sandbox
API server (``sandbox.Sandbox``) loaded with ``sandbox.scenarios.generate(...)``, the real
``offloading.cluster.kube`` client over HTTP, and Django's test client for the pages.
"""

# Fleet sizes: (namespaces, clusters). The default run measures all; --quick the first two. Page
# ratios are the biggest fleet's over the first one's.
FLEETS: tuple[tuple[int, int], ...] = ((100, 5), (1_000, 20), (10_000, 200))


# How a generated fleet offloads (the sandbox's generated:NxC@F~E): a fraction F of its namespaces, with
# region / provider selectors, except a share E of those with no selector (every peer). 10 % with
# selectors, except in the smallest fleets: there 60 % are offloaded and 90 % of those on every peer, so
# that the measured pages show full pages (50 rows: the list, a ?cluster= filter, the matrix) there too;
# otherwise a page ratio would measure how many rows are shown (7 against 50), not what the fleet's size
# costs.
def offloading_mix(namespaces: int) -> str:
    return "@0.6~0.9" if namespaces <= 100 else "@0.1"
