"""What the tests and the ``benchmarks/`` scripts share, in one place: tiny randomly initialised models of the
production classes (``tiny_models``, ``tiny_qwen``), stand-in submissions (``submissions``), a PostgreSQL server
in a temporary folder (``postgres``) and the crash soak's workers (``soak``).

Neither ``tests/`` nor ``benchmarks/`` imports the other: both import from here (``tests/test_layering.py``).
Nothing here is loaded by the app, the worker or the command line."""
