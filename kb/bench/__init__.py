"""Benchmarks, ``kb bench financebench|docugami|loong|latency|ingest|load`` (arguments in ``kb.bench.cli``).

One module per job: ``harness`` (the question datasets over the production router and its answer),
``datasets`` (``DATASETS``: each question set declared once, with its loader and own metrics), ``metrics``,
``entities`` (Loong's ``right_entities``) and ``report`` (their markdown); ``latency`` (entry) with
``synthetic`` (corpus generator), ``loader``, ``measure``, ``latency_report`` and ``latency_types``;
``ingest_profile``; ``load``. Shared: ``strategies`` (what a benchmark can run, from ``router.types``),
``environment`` (machine, commit, date, versions) and ``markdown`` (tables).
"""
