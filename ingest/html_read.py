"""HTML ``.html``/``.htm`` → :class:`~ingest.outline.Outline`, parsed with lxml's HTML parser.

``h1``–``h6`` are headings; paragraphs, ``div`` text, list items (``- item``), ``<br>``-separated
lines, ``<pre>`` lines and table rows (cells joined by ``" | "``) are the units. Scripts, styles,
navigation, page headers and footers, asides, ``noscript``, ``template``, forms' controls, hidden
elements and comments are dropped; a ``header``/``footer`` inside ``article`` or ``main`` belongs to
the content (it often holds the article's ``h1``) and is kept. Metadata comes from ``<title>``,
``<meta name|property=…>`` (description, author, keywords, subject, company, dates) and ``lang``.
"""

from __future__ import annotations

import codecs
import re
from typing import Any

import lxml.html
import structlog
from lxml import etree

from ingest.markdown_tree import decode_text_file
from ingest.outline import Block, Outline, date_fields, keyword_list, make_outline, one_line, table_row
from kb.core.errors import IngestError

log = structlog.get_logger("ingest.html_read")

DROPPED = frozenset({
    "head", "script", "style", "nav", "header", "footer", "aside", "noscript", "template", "svg", "math",
    "canvas", "iframe", "object", "embed", "button", "select", "textarea", "datalist", "dialog",
})
"""Elements whose content is never text of the document (``header``/``footer``: see module doc)."""
_DROPPED_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "search"})
_CONTENT_ROOTS = frozenset({"article", "main"})
_BLOCKS = frozenset({
    "address", "article", "blockquote", "body", "center", "dd", "details", "div", "dl", "dt", "fieldset",
    "figcaption", "figure", "footer", "form", "header", "hgroup", "html", "legend", "main", "ol", "p",
    "section", "summary", "ul", "caption", "hr",
})
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_SPACED = _BLOCKS | set(_HEADINGS) | {"br", "li", "pre", "table", "tr", "td", "th"}
_ROW_GROUPS = frozenset({"thead", "tbody", "tfoot"})
_CHARSET = re.compile(rb"""<meta[^>]{0,200}?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]{1,40})""", re.I)
_XML_DECL = re.compile(r"\A\s*<\?xml[^>]*\?>")
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)

_META_KEYS: dict[str, str] = {
    "og:title": "title", "dc.title": "title", "dcterms.title": "title",
    "description": "description", "og:description": "description", "dc.description": "description",
    "dcterms.description": "description",
    "author": "author", "dc.creator": "author", "dcterms.creator": "author", "article:author": "author",
    "keywords": "keywords", "news_keywords": "keywords",
    "subject": "subject", "dc.subject": "subject", "dcterms.subject": "subject",
    "company": "company", "organization": "company", "organisation": "company",
    "publisher": "publisher", "dc.publisher": "publisher", "dcterms.publisher": "publisher",
    "date": "created", "dc.date": "created", "dcterms.created": "created", "dcterms.date": "created",
    "dcterms.issued": "created", "article:published_time": "created",
    "last-modified": "modified", "dcterms.modified": "modified", "article:modified_time": "modified",
}


def read_html(data: bytes) -> Outline:
    """The outline of an HTML file's bytes. Raises ``IngestError`` with the reason it cannot be read."""
    if not data:
        raise IngestError("empty file (0 bytes)")
    text, warnings = _decode(data)
    try:
        root = lxml.html.document_fromstring(_XML_DECL.sub("", text, count=1))
    except (etree.ParserError, ValueError) as exc:
        raise IngestError(f"no readable text in the HTML document ({one_line(str(exc))})") from exc
    collector = _Collector()
    collector.walk(root)
    collector.flush()
    return make_outline(collector.blocks, _properties(root), warnings=warnings, what="HTML document")


def _decode(data: bytes) -> tuple[str, list[str]]:
    """Bytes → text: a BOM, else the ``<meta charset>`` declared in the first 4 KB, else UTF-8, else
    windows-1252 (what browsers assume for undeclared legacy pages)."""
    m = _CHARSET.search(data[:4096])
    codec = None
    if m:
        try:
            codec = codecs.lookup(m.group(1).decode("ascii")).name
        except LookupError:
            codec = None
    if codec in ("utf-8", "ascii") or (codec or "").startswith("utf-16"):
        codec = None  # UTF-8 is the default; a UTF-16 page has a BOM
    return decode_text_file(data, encoding=codec, fallback="windows-1252")


def _dropped(el: Any) -> bool:
    tag = el.tag
    if tag in ("header", "footer"):
        return not any(a.tag in _CONTENT_ROOTS for a in el.iterancestors())
    if tag in DROPPED or el.get("hidden") is not None or el.get("aria-hidden", "").lower() == "true":
        return True
    if (el.get("role") or "").lower() in _DROPPED_ROLES:
        return True
    return bool(_HIDDEN_STYLE.search(el.get("style") or ""))


def _text(el: Any) -> str:
    """The visible text of ``el`` (dropped descendants left out, ``<br>`` as a space)."""
    parts: list[str] = [el.text or ""]
    for child in el:
        if isinstance(child.tag, str) and not _dropped(child):
            inner = _text(child)
            parts.append(f" {inner} " if child.tag in _SPACED else inner)  # block edges separate words
        parts.append(child.tail or "")
    return "".join(parts)


class _Collector:
    """Walks the element tree and emits one block per heading, paragraph, line, list item or table row."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.buf: list[str] = []
        self.prefix = ""

    def flush(self) -> None:
        text = one_line("".join(self.buf))
        self.buf.clear()
        if text:
            self.blocks.append(Block(text=self.prefix + text))
            self.prefix = ""

    def walk(self, el: Any) -> None:
        tag = el.tag
        if not isinstance(tag, str) or _dropped(el):  # comments, processing instructions, dropped elements
            return
        if tag in _HEADINGS:
            self.flush()
            if title := one_line(_text(el)):
                self.blocks.append(Block(text=title, level=_HEADINGS[tag]))
        elif tag == "table":
            self.flush()
            self._table(el)
        elif tag == "pre":
            self.flush()
            self.blocks.extend(Block(text=one_line(line)) for line in _text(el).split("\n") if line.strip())
        elif tag == "br":
            self.flush()
        elif tag == "li":
            self.flush()
            self.prefix = "- "
            self._children(el)
            self.flush()
            self.prefix = ""
        elif tag in _BLOCKS:
            self.flush()
            self._children(el)
            self.flush()
        else:
            self._children(el)

    def _children(self, el: Any) -> None:
        self.buf.append(el.text or "")
        for child in el:
            self.walk(child)
            self.buf.append(child.tail or "")

    def _table(self, table: Any) -> None:
        for child in table:
            if not isinstance(child.tag, str) or _dropped(child):
                continue
            if child.tag == "caption":
                if caption := one_line(_text(child)):
                    self.blocks.append(Block(text=caption))
            elif child.tag in _ROW_GROUPS:
                rows = [tr for tr in child if tr.tag == "tr"]
                self._rows(rows)
            elif child.tag == "tr":
                self._rows([child])

    def _rows(self, rows: list[Any]) -> None:
        for tr in rows:
            if _dropped(tr):
                continue
            cells = [_text(td) for td in tr if td.tag in ("td", "th") and not _dropped(td)]
            if row := table_row(cells):
                self.blocks.append(Block(text=row))


def _properties(root: Any) -> dict[str, Any]:
    """``<title>``, ``<meta>`` and ``lang`` as front-matter keys (``<title>`` first for the title)."""
    found: dict[str, str] = {}
    title = root.find(".//title")
    if title is not None and one_line(title.text_content()):
        found["title"] = one_line(title.text_content())
    for meta in root.iter("meta"):
        name = (meta.get("name") or meta.get("property") or meta.get("http-equiv") or "").strip().lower()
        key, content = _META_KEYS.get(name), one_line(meta.get("content") or "")
        if key and content and key not in found:
            found[key] = content
    out: dict[str, Any] = {k: v for k, v in found.items() if k not in ("keywords", "created", "modified")}
    if "keywords" in found:
        out["keywords"] = keyword_list(found["keywords"])
    out.update(date_fields(found.get("created"), found.get("modified")))
    if lang := (root.get("lang") or "").strip():
        out["language"] = lang
    return out
