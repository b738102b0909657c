"""Section recall of the offline tree per generated kind (tests/docgen.py): the tree check of issue 41.

``python -m tests.tree_recall DIR`` writes every kind's PDF and its truth (``KIND.pdf``, ``KIND.json``) into DIR
unless they are there, builds each offline tree with the ``ingest`` package first on ``sys.path`` and prints one
Markdown row per kind: sections, pages, nodes, recall with the start page ±1 and exact. Run it once with the code
of ``main`` and once with a branch on the same DIR (``--no-make`` reads the PDFs only, so the generator of the
branch writes them for both) to compare the two: run it as a module from the checkout to measure, or for another
checkout's code as ``PYTHONPATH=OTHER python -c "import runpy, sys; sys.argv = ['tree_recall', DIR, '--no-make'];
runpy.run_path('tests/tree_recall.py', run_name='__main__')"`` (run as a file, tests/http.py would shadow ``http``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import ingest
from ingest.pdf_read import read_pdf
from ingest.pdf_tree import build_pdf_tree
from kb.core.logging import configure_logging
from kb.core.providers.chat import OfflineChatModel
from kb.core.settings import IngestSettings
from tests.docgen import Truth, section_recall


def _make(folder: Path, kinds: list[str]) -> None:
    from tests.docgen import KINDS

    for kind in kinds or sorted(KINDS):
        pdf, truth = folder / f"{kind}.pdf", folder / f"{kind}.json"
        if pdf.exists() and truth.exists():
            continue
        made = KINDS[kind](pdf)
        truth.write_text(json.dumps([[t.title, t.level, t.page] for t in made.truth]))


async def _row(pdf: Path) -> str:
    truth = [Truth(title, level, page) for title, level, page in json.loads(pdf.with_suffix(".json").read_text())]
    started = time.perf_counter()
    parsed = read_pdf(pdf)
    tree = await build_pdf_tree(parsed, OfflineChatModel(), IngestSettings())
    seconds = time.perf_counter() - started
    return (f"| {pdf.stem} | {len(truth)} | {parsed.page_count} | {len(tree.nodes)} | "
            f"{section_recall(tree, truth):.3f} | {section_recall(tree, truth, 0):.3f} | {tree.source_mode} | "
            f"{seconds:.1f} |")


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("kinds", nargs="*", help="only these kinds (default: all)")
    parser.add_argument("--no-make", action="store_true", help="read the PDFs already in the folder only")
    args = parser.parse_intermixed_args(argv)
    configure_logging(level="warning")
    args.folder.mkdir(parents=True, exist_ok=True)
    if not args.no_make:
        _make(args.folder, args.kinds)
    print(f"ingest from {Path(ingest.__file__).parent}", file=sys.stderr)
    print("| kind | sections | pages | nodes | recall ±1 | exact | mode | s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for pdf in sorted(args.folder.glob("*.pdf")):
        if not args.kinds or pdf.stem in args.kinds:
            print(await _row(pdf), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
