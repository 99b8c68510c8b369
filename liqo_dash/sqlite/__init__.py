"""Django's SQLite backend with a quicker wait for the write lock (see :mod:`liqo_dash.sqlite.base`)."""
