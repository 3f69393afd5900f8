"""What the tests and the ``benchmarks/`` scripts share, in one place: tiny randomly initialised models of the
production classes (``tiny_models``, ``tiny_qwen``), stand-in submissions (``submissions``) and hostile zips
(``hostile_zips``), a PostgreSQL server in a temporary folder (``postgres``), the crash soak's workers (``soak``), a
stand-in of the public services a suite is built from (``public_sources``: Wikidata, Wikipedia, Commons, the Hub and
GitHub, on 127.0.0.1) and the app live in the calling process with its page's own events (``live_app``).

Neither ``tests/`` nor ``benchmarks/`` imports the other: both import from here (``tests/test_layering.py``).
Nothing here is loaded by the app, the worker or the command line."""
