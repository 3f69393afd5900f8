"""The leaderboard's tabs, one module each: ``overview``, ``slices``, ``compare``, ``datasets``, ``metrics``,
``submit``, ``queue`` and ``about``.

Each tab is a class shaped like ``datasets.DatasetBrowser``: its view functions (what a page event or an API
endpoint calls) are plain methods over the ``site.Site`` every tab shares (the store, its catalog, the download
folder), and ``build()``, called inside a ``gr.Tab``, makes its components, wires its own events and returns them by
name (``widgets.Parts``). ``leaderboard.app`` only puts the tabs together: links, the first paint, the timer and the
API.

Reads go through the store and the catalog (``leaderboard.tables``, ``Store``): no module here holds SQL or builds a
path inside the store (``tests/test_ui_modules.py``).
"""
