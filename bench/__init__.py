"""Benchmarks of liqo-dash on generated fleets (``python -m bench``, ``make bench``).

They print counts (Kubernetes LIST calls, SQL queries) and wall-clock times with their ratios between
fleet sizes; they never fail on a time. Counts that should not grow with the fleet (LIST pages beyond
one per 500 items, page queries) are flagged in the report, not turned into an exit status, except
when a benchmark cannot run at all.

Everything runs in this process: a throwaway SQLite database in a temporary directory, the sandbox
API server (``sandbox.Sandbox``) loaded with ``sandbox.scenarios.generate(...)``, the real
``offloading.kube`` client over HTTP, and Django's test client for the pages.
"""

# Fleet sizes: (namespaces, clusters). The default run measures all; --quick the first two. Page
# ratios are the biggest fleet's over the first one's.
FLEETS: tuple[tuple[int, int], ...] = ((100, 5), (1_000, 20), (10_000, 200))


# The fraction of namespaces offloaded in a generated fleet: 10 %, except in the smallest fleets, where
# it is raised so that the measured pages show full pages (50 rows) there too; otherwise a page ratio
# would measure how many rows are shown (2 against 50), not what the fleet's size costs.
def offloaded_fraction(namespaces: int) -> float:
    return 0.6 if namespaces <= 100 else 0.1
