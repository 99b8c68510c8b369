"""Change governance (issue 29): which changes need a second person and the change windows (``policy``,
``windows``), what a change that waits records (``holds``), the decisions on it (``approvals``), the
beat's expiries and releases (``beat``), the alerts (``notify``) and the one clock they all read (``clock``).

Below the write path: ``offloading.changes`` asks it whether a change it records waits, and the pages,
the API and the beat tasks drive the decisions. It never imports the write path back.
"""
