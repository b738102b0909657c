"""Speed and agreement of the bundled all-MiniLM-L6-v2 on torch (sentence-transformers) and on onnxruntime
(fp32, int8 and int8-smooth, each text run alone on one thread, ``threads`` at a time, as configured; and in length-sorted
batches on ``threads`` intra-op threads, for comparison): chunks/s (wall clock, and per
CPU-second of this process, steadier on a shared machine) over ~1,000 chunk-sized texts at batch sizes
16/32/64 (runs interleaved, repeated), cosine of each text's vector to torch's, and overlap@10 of ~200
queries' nearest texts with torch's (with the torch rank of the neighbours a variant brings in instead).

    python bench/embedders/onnx_minilm.py --data ../shared/data/loong-en-dev --cache /tmp/kb-models --out r.json

Texts: every file under ``--data`` (``*.txt``, whitespace collapsed) cut into 800-character pieces, taken round
robin across files; queries: a sentence of a random text cut to 60% of its words.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import time
from pathlib import Path

import numpy as np

from kb.core.providers.embed import build_embedder
from kb.core.providers.local_models import BUNDLED_MINILM, ONNX_MINILM, ONNX_MINILM_INT8, ONNX_MINILM_SMOOTH
from kb.core.providers.onnx_embed import OnnxMiniLMEmbedder


def chunk_texts(data: Path, n: int, size: int = 800) -> list[str]:
    per_file = []
    for path in sorted(data.rglob("*.txt")):
        text = re.sub(r"\s+", " ", path.read_text(errors="replace"))
        per_file.append([text[i : i + size] for i in range(0, len(text) - size, size)])
    out: list[str] = []
    k = 0
    while len(out) < n and any(k * 7 + 3 < len(p) for p in per_file):
        out += [p[k * 7 + 3] for p in per_file if k * 7 + 3 < len(p)][: n - len(out)]
        k += 1
    return out


def queries(texts: list[str], n: int) -> list[str]:
    out = []
    for i in random.Random(0).sample(range(len(texts)), len(texts)):
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", texts[i]) if len(s.split()) >= 8]
        if sentences:
            words = sentences[len(sentences) // 2].split()
            out.append(" ".join(words[: max(6, int(len(words) * 0.6))]))
        if len(out) == n:
            break
    return out


def top10(q: np.ndarray, d: np.ndarray) -> np.ndarray:
    return np.argsort(-(q @ d.T), axis=1, kind="stable")[:, :10]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--cache", type=Path, required=True, help="directory of the exported ONNX files")
    ap.add_argument("--texts", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--batches", default="16,32,64")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    texts = chunk_texts(args.data, args.texts)
    qs = queries(texts, args.queries)
    embedders = {"torch": build_embedder(BUNDLED_MINILM, cache_dir=args.cache),
                  "onnx-fp32": build_embedder(ONNX_MINILM, cache_dir=args.cache),
                  "onnx-int8": build_embedder(ONNX_MINILM_INT8, cache_dir=args.cache),
                  "onnx-int8-smooth": build_embedder(ONNX_MINILM_SMOOTH, cache_dir=args.cache),
                  "onnx-fp32-batched": OnnxMiniLMEmbedder(cache_dir=args.cache, precision="fp32", one_text_per_run=False),
                  "onnx-int8-batched": OnnxMiniLMEmbedder(cache_dir=args.cache, precision="int8", one_text_per_run=False)}
    for e in embedders.values():
        e.embed_batch(texts[:8])  # warm up
    speed: list[dict] = []
    vectors: dict[str, np.ndarray] = {}
    for rep in range(args.repeats):
        for bs in (int(b) for b in args.batches.split(",")):
            for name, e in embedders.items():
                e.batch_size = bs  # type: ignore[attr-defined]
                wall, cpu = time.perf_counter(), time.process_time()
                vecs = e.embed_batch(texts)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                vectors.setdefault(name, vecs)
                row = {"repeat": rep + 1, "batch": 1 if getattr(e, "one_text_per_run", False) else bs,
                       "embedder": name, "chunks_per_s": round(len(texts) / wall, 1),
                       "chunks_per_cpu_s": round(len(texts) / cpu, 1), "load1": round(os.getloadavg()[0], 2)}
                speed.append(row)
                print(json.dumps(row), flush=True)
    ref_q = embedders["torch"].embed_batch(qs)
    ref_rank = np.argsort(np.argsort(-(ref_q @ vectors["torch"].T), axis=1, kind="stable"), axis=1)
    ref_top = top10(ref_q, vectors["torch"])
    quality = {}
    for name in ("onnx-fp32", "onnx-int8", "onnx-int8-smooth", "onnx-fp32-batched", "onnx-int8-batched"):
        cos = (vectors[name] * vectors["torch"]).sum(axis=1)
        q = embedders[name].embed_batch(qs)
        qcos = (q * ref_q).sum(axis=1)
        top = top10(q, vectors[name])
        overlap = [len(set(a) & set(b)) / 10 for a, b in zip(top, ref_top, strict=True)]
        brought_in = [int(ref_rank[i, j]) + 1 for i, row in enumerate(top) for j in row if ref_rank[i, j] >= 10]
        quality[name] = {"text_cosine_mean": float(cos.mean()), "text_cosine_min": float(cos.min()),
                         "query_cosine_mean": float(qcos.mean()), "query_cosine_min": float(qcos.min()),
                         "overlap_at_10_mean": float(np.mean(overlap)), "overlap_at_10_min": float(np.min(overlap)),
                         "top1_same": float(np.mean(top[:, 0] == ref_top[:, 0])),
                         "brought_in_torch_rank_median": float(np.median(brought_in)) if brought_in else None,
                         "brought_in_within_torch_top20": float(np.mean(np.array(brought_in) <= 20))
                         if brought_in else None}
        print(name, json.dumps(quality[name]), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"texts": len(texts), "queries": len(qs), "cores": os.cpu_count(),
                                        "threads": {k: e.threads for k, e in embedders.items()},
                                        "speed": speed, "quality": quality}, indent=1))


if __name__ == "__main__":
    main()
