"""GET /kb/capabilities: what this server takes and does — file formats, routing strategies, the financial
facts vocabulary, answer mode.

Derived, never copied: formats from ``ingest.formats.FORMATS``, strategies from ``router.types.Strategy``
(the default from ``QueryRequest``), the answer mode from the runtime's chat model. The web UI builds its
upload ``accept`` list and its strategy selector from this answer.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from litestar import Controller, get

from ingest.formats import FORMATS
from ingest.pdf_read.ocr import OcrEngine, engine_for
from kb.api.common import BEARER, errors, read_guard
from kb.core.measures import CONCEPTS
from kb.runtime import Runtime
from router.types import STRATEGIES, QueryRequest

STRATEGY_LABELS: dict[str, tuple[str, str]] = {
    "auto": ("Auto", "metadata, then semantic"),
    "metadata": ("Metadata", "filters from the question"),
    "semantic": ("Semantic", "document similarity"),
    "description": ("Description", "document summaries"),
}
"""Strategy → (label, what it routes by). A strategy of ``router.types`` without an entry is shown by its name
(``tests/test_capabilities.py`` asks for one)."""


class FormatInfo(msgspec.Struct, frozen=True):
    name: str
    suffixes: list[str]
    unit: str  # what citations of this format count: page | line | paragraph


class StrategyInfo(msgspec.Struct, frozen=True):
    name: str
    label: str
    description: str


class ConceptInfo(msgspec.Struct, frozen=True):
    name: str
    label: str
    statements: list[str]  # the statements its lines stand on
    unit: str  # money | per_share | shares


class Capabilities(msgspec.Struct, frozen=True):
    formats: list[FormatInfo]
    strategies: list[StrategyInfo]
    concepts: list[ConceptInfo]  # the financial facts vocabulary (GET /kb/documents/{id}/facts?concept=…)
    default_strategy: str
    answer_mode: Literal["offline", "llm"]  # offline: extractive cited answers, no LLM
    max_upload_mb: int
    chat_model: str | None = None  # the configured LLM's name (KB_LLM_MODEL) in llm mode
    read_token: bool = False  # KB_API_TOKEN is set: reading needs it
    admin_token: bool = False  # KB_ADMIN_TOKEN is set: ingest and delete need it
    ocr_languages: str | None = None  # scanned PDF pages are read by OCR in these (Tesseract's "eng+chi_sim"); None: not


def default_strategy() -> str:
    """The strategy ``POST /kb/query`` uses when none is given."""
    return str(next(f.default for f in msgspec.structs.fields(QueryRequest) if f.name == "strategy"))


def capabilities(rt: Runtime) -> Capabilities:
    """This server's capabilities (no database needed)."""
    formats = [FormatInfo(name=f.name, suffixes=list(f.suffixes), unit=f.unit) for f in FORMATS.values()]
    strategies = [StrategyInfo(name=s, label=STRATEGY_LABELS.get(s, (s, ""))[0],
                               description=STRATEGY_LABELS.get(s, (s, ""))[1]) for s in STRATEGIES]
    concepts = [ConceptInfo(name=c.name, label=c.label, statements=list(c.kinds), unit=c.unit) for c in CONCEPTS]
    return Capabilities(formats=formats, strategies=strategies, concepts=concepts, default_strategy=default_strategy(),
                        answer_mode="offline" if rt.chat.offline else "llm",
                        max_upload_mb=rt.settings.ingest.max_upload_mb,
                        chat_model=None if rt.chat.offline else getattr(rt.chat, "model_id", None),
                        read_token=rt.settings.server.api_token is not None,
                        admin_token=rt.settings.server.admin_token is not None,
                        ocr_languages=ocr.languages if (ocr := _ocr(rt)) is not None else None)


def _ocr(rt: Runtime) -> OcrEngine | None:
    s = rt.settings.ingest
    return engine_for(s.ocr, s.ocr_languages.split("+"), s.ocr_dpi)


class CapabilitiesController(Controller):
    path = "/kb"
    guards = [read_guard]
    security = BEARER

    @get("/capabilities", responses=errors(401), sync_to_thread=False)
    def get_capabilities(self, rt: Runtime) -> Capabilities:
        """Supported file formats and their suffixes, routing strategies with labels, and the answer mode."""
        return capabilities(rt)
