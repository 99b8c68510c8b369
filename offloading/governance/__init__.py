"""Change governance (issue 29): which changes need a second person and the change windows (``policy``,
``windows``), what a change that waits records (``holds``), the decisions on it (``approvals``) and what
they decided (``decisions``), the beat's expiries and releases (``beat``), the alerts (``notify``) and the
one clock they all read (``clock``). Per managed cluster (issue 28): every change is held by its cluster's
rules, decided in its cluster's pages and API with its cluster's scopes, and audited under its cluster.

Below the write path: ``offloading.changes`` asks it whether a change it records waits, and the pages,
the API and the beat tasks drive the decisions. It never imports the write path back.
"""
