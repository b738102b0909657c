"""``kb bench`` argument wiring; the harness itself lives in ``kb.bench``."""

from __future__ import annotations

import argparse


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    from kb.bench.cli import add_arguments

    add_arguments(parser)


def run_bench(args: argparse.Namespace) -> int:
    from kb.bench.cli import run

    return run(args)
