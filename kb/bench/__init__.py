"""Benchmarks, ``kb bench financebench|docugami|latency|ingest|load`` (arguments in ``kb.bench.cli``).

One module per job: ``harness`` (financebench/docugami over the production router), ``datasets``,
``metrics`` and ``report`` (their markdown); ``latency`` (entry) with ``synthetic`` (corpus generator),
``loader``, ``measure``, ``latency_report`` and ``latency_types``; ``ingest_profile``; ``load``.
Shared: ``strategies`` (what a benchmark can run, from ``router.types``), ``environment`` (machine,
commit, date, versions) and ``markdown`` (tables).
"""
