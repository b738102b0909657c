"""Markdown and plain-text documents → ``DocumentTree`` (spec 000 §4), no LLM involved.

Markdown: headings come from markdown-it-py's CommonMark parser (ATX ``#`` and setext headings;
``#`` lines inside fenced or indented code are not headings). Each node's ``text`` is its *own*
text, from its heading line to the next heading of any level; ``start``/``end`` are 1-based line
numbers of the original file (front matter included in the count) and ``end`` covers the subtree.
Plain text: one root node titled after the file, split at heading-like lines, else into
paragraph windows. Both thin small subtrees (§4.5) and split oversized leaves into "part" nodes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import structlog
from markdown_it import MarkdownIt

from ingest.front_matter import split_front_matter
from kb.core.errors import IngestError
from kb.core.settings import IngestSettings
from kb.core.text import count_tokens
from kb.core.types import DocumentTree, TreeNode

log = structlog.get_logger("ingest.markdown_tree")

PREFACE_TITLE = "Preface"
_TEXT_WINDOW_MIN, _TEXT_WINDOW_MAX = 1000, 4000  # plain text without headings: tokens per window node


@dataclass
class _Section:
    """A heading and its own lines ``start..own_end`` (0-based, inclusive) of the body."""

    level: int
    title: str
    start: int
    own_end: int
    children: list[_Section] = field(default_factory=list)
    tokens: int = 0
    heading_line: bool = True  # the first line is the heading itself (not body text)

    def subtree_end(self) -> int:
        return self.children[-1].subtree_end() if self.children else self.own_end

    def subtree_tokens(self) -> int:
        return self.tokens + sum(c.subtree_tokens() for c in self.children)


# --------------------------------------------------------------------------- decoding


def decode_text_file(data: bytes, *, encoding: str | None = None,
                     fallback: str | None = None) -> tuple[str, list[str]]:
    """Bytes of a text file → (text, warnings). Raises ``IngestError`` for empty or binary files.

    A UTF-16 BOM wins; else ``encoding`` (one the file declares) or UTF-8. Bytes that are not UTF-8 are
    decoded as ``fallback`` when given (HTML: windows-1252), else with replacement characters.
    """
    warnings: list[str] = []
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise IngestError("binary content (invalid UTF-16)") from exc
    else:
        if b"\x00" in data[:65536]:
            raise IngestError("binary content (NUL bytes); not a text file")
        if encoding and not data.startswith(b"\xef\xbb\xbf"):
            text = data.decode(encoding, errors="replace")
        else:
            try:
                text = data.decode("utf-8-sig")
            except UnicodeDecodeError:
                chinese = _chinese_legacy(data)
                if chinese is not None:
                    text = chinese
                    warnings.append("not valid UTF-8; decoded as GB18030 (Chinese)")
                else:
                    text = data.decode(fallback or "utf-8", errors="replace")
                    warnings.append(f"not valid UTF-8; decoded as {fallback}" if fallback
                                    else "not valid UTF-8; decoded with replacement characters")
    if not text.strip():
        raise IngestError("empty file")
    sample = text[:65536]
    bad = sum(1 for c in sample if c == "\ufffd" or (ord(c) < 32 and c not in "\t\n\r\f\v"))
    if bad > 0.1 * len(sample):
        raise IngestError("binary content (mostly non-text bytes); not a text file")
    if "\x00" in text:  # UTF-16 text or a stray NUL past the sniffed prefix: Postgres text rejects it
        text = text.replace("\x00", "")
        warnings.append("NUL characters removed")
    return text.replace("\r\n", "\n").replace("\r", "\n"), warnings


_CJK_TEXT = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef\U00020000-\U0003134f]")


def _chinese_legacy(data: bytes) -> str | None:
    """The text of a GB18030/GBK/GB2312 file (common for Chinese .txt), or ``None`` when the bytes are not
    that: they must decode strictly, their non-ASCII characters be Chinese, and mostly in runs (Latin-1 text
    that happens to decode reads as single ideographs between Latin letters: "Köln" → "K鰈n")."""
    try:
        text = data.decode("gb18030")
    except UnicodeDecodeError:
        return None
    sample = text[:65536]
    wide = [i for i, c in enumerate(sample) if ord(c) > 127]
    if not wide or sum(1 for i in wide if _CJK_TEXT.match(sample[i])) < 0.95 * len(wide):
        return None
    at = set(wide)
    in_runs = sum(1 for i in wide if i - 1 in at or i + 1 in at)
    return text if in_runs >= 0.6 * len(wide) else None


# --------------------------------------------------------------------------- shared tree assembly


def _own_text(lines: list[str], sec: _Section) -> str:
    return "\n".join(lines[sec.start : sec.own_end + 1])


def _trim_end(lines: list[str], start: int, end: int) -> int:
    """Last non-blank line in ``start..end`` (at least ``start``)."""
    while end > start and not lines[end].strip():
        end -= 1
    return end


def _nest(flat: list[_Section]) -> list[_Section]:
    """Stack-based tree build (spec §4.6): a section is a child of the nearest previous lower level."""
    roots: list[_Section] = []
    stack: list[_Section] = []
    for sec in flat:
        while stack and stack[-1].level >= sec.level:
            stack.pop()
        (stack[-1].children if stack else roots).append(sec)
        stack.append(sec)
    return roots


def _thin(sec: _Section, min_tokens: int) -> None:
    """Spec §4.5: a node whose whole subtree has fewer than ``min_tokens`` tokens absorbs its descendants."""
    for child in sec.children:
        _thin(child, min_tokens)
    if sec.children and sec.subtree_tokens() < min_tokens:
        sec.tokens = sec.subtree_tokens()
        sec.own_end = sec.subtree_end()
        sec.children = []


def _paragraph_spans(lines: list[str], start: int, end: int) -> list[tuple[int, int]]:
    """Blank-line separated paragraphs in ``start..end`` as inclusive line spans."""
    spans: list[tuple[int, int]] = []
    cur: int | None = None
    for i in range(start, end + 1):
        if lines[i].strip():
            if cur is None:
                cur = i
        elif cur is not None:
            spans.append((cur, i - 1))
            cur = None
    if cur is not None:
        spans.append((cur, end))
    return spans


def _windows(lines: list[str], start: int, end: int, max_tokens: int) -> list[tuple[int, int, int]]:
    """Pack paragraphs (then lines, for a huge paragraph) of ``start..end`` into spans ≤ ``max_tokens``."""
    units: list[tuple[int, int, int]] = []
    for a, b in _paragraph_spans(lines, start, end):
        tokens = count_tokens("\n".join(lines[a : b + 1]))
        if tokens <= max_tokens or a == b:
            units.append((a, b, tokens))
        else:
            units.extend((i, i, count_tokens(lines[i])) for i in range(a, b + 1) if lines[i].strip())
    out: list[tuple[int, int, int]] = []
    for a, b, tokens in units:
        if out and out[-1][2] + tokens <= max_tokens:
            out[-1] = (out[-1][0], b, out[-1][2] + tokens)
        else:
            out.append((a, b, tokens))
    return out


def _split_large(sec: _Section, lines: list[str], max_tokens: int) -> None:
    """Leaves over ``max_tokens`` get "(part n)" children; the heading line stays the parent's text."""
    for child in sec.children:
        _split_large(child, lines, max_tokens)
    if sec.children or sec.tokens <= max_tokens:
        return
    body_start = sec.start + 1 if sec.heading_line and sec.own_end > sec.start else sec.start
    parts = _windows(lines, body_start, sec.own_end, max_tokens)
    if len(parts) < 2:
        return
    sec.children = [
        _Section(level=sec.level + 1, title=f"{sec.title} (part {k})", start=a, own_end=b, tokens=t)
        for k, (a, b, t) in enumerate(parts, start=1)
    ]
    if body_start == sec.start:  # no heading line (a window or preface): part 1 starts the node
        sec.children[0].start = sec.start
        sec.own_end = sec.start - 1
    else:
        sec.own_end = sec.start
    sec.tokens = count_tokens(_own_text(lines, sec))


def _emit(roots: list[_Section], lines: list[str], offset: int, unit: str) -> tuple[TreeNode, ...]:
    """Depth-first node ids "0000"…, 1-based line ranges shifted by ``offset`` (removed front matter)."""
    nodes: list[TreeNode] = []

    def visit(sec: _Section, parent: TreeNode | None, depth: int, path: tuple[str, ...]) -> None:
        idx = len(nodes)
        own = _own_text(lines, sec) if sec.own_end >= sec.start else ""
        node = TreeNode(
            node_id=f"{idx:04d}",
            parent_id=parent.node_id if parent else None,
            ordinal=idx,
            level=depth,
            title=sec.title,
            start=sec.start + 1 + offset,
            end=max(sec.start, sec.subtree_end()) + 1 + offset,
            text=own,
            summary="",
            path=(*path, sec.title),
            is_leaf=not sec.children,
            unit=unit,
        )
        nodes.append(node)
        for child in sec.children:
            visit(child, node, depth + 1, node.path)

    for root in roots:
        visit(root, None, 1, ())
    return tuple(nodes)


def _finish(
    roots: list[_Section], lines: list[str], settings: IngestSettings, offset: int, mode: str, warnings: list[str],
    unit: str = "line",
) -> DocumentTree:
    for sec in _walk(roots):
        sec.tokens = count_tokens(_own_text(lines, sec))
    for root in roots:
        _thin(root, settings.min_node_token)
        _split_large(root, lines, settings.max_token_num_each_node)
    nodes = _emit(roots, lines, offset, unit)
    total_lines = len(lines) + offset
    log.debug("ingest.text_tree_built", mode=mode, nodes=len(nodes), lines=total_lines)
    return DocumentTree(nodes=nodes, page_count=total_lines, source_mode=mode, unit=unit, warnings=tuple(warnings))


def _walk(roots: list[_Section]) -> list[_Section]:
    out: list[_Section] = []
    for sec in roots:
        out.append(sec)
        out.extend(_walk(sec.children))
    return out


def _split_lines(text: str) -> list[str]:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # a final newline does not start another line
    return lines


# --------------------------------------------------------------------------- Markdown

_MD = MarkdownIt("commonmark")


def _inline_plain(children: list) -> str:
    parts = [c.content for c in children if c.type in ("text", "code_inline", "html_inline")]
    parts += [" " for c in children if c.type in ("softbreak", "hardbreak")]
    return " ".join("".join(parts).split())


def _markdown_headings(body: str) -> list[tuple[int, int, str]]:
    """(0-based line, level, plain title) of top-level headings, outside code blocks."""
    tokens = _MD.parse(body)
    out: list[tuple[int, int, str]] = []
    for i, tok in enumerate(tokens):
        if tok.type != "heading_open" or tok.level != 0 or tok.map is None:
            continue
        inline = tokens[i + 1]
        title = _inline_plain(inline.children or []) or inline.content.strip()
        if title:
            out.append((tok.map[0], int(tok.tag[1]), title))
    return out


def build_markdown_tree(text: str, settings: IngestSettings, *, title: str | None = None) -> DocumentTree:
    """Markdown → tree of heading sections (YAML front matter is skipped; ``metadata`` parses it)."""
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    _, body, offset = split_front_matter(text)
    headings = _markdown_headings(body)
    if not headings:  # a Chinese report written as Markdown without '#': its numbered headings
        found = [h for h in _text_headings(_split_lines(body)) if h[1] in _ZH_STYLES[1:]]
        levels = _levels(found)
        headings = [(line, levels[style], heading) for line, style, heading in found]
    warnings = [] if headings else ["no Markdown headings found; the document is a single node"]
    return tree_from_headings(_split_lines(body), headings, settings, title=title, offset=offset,
                              mode="markdown", warnings=warnings)


def tree_from_headings(
    lines: list[str],
    headings: list[tuple[int, int, str]],
    settings: IngestSettings,
    *,
    title: str | None,
    mode: str,
    unit: str = "line",
    offset: int = 0,
    warnings: list[str] | None = None,
) -> DocumentTree:
    """Lines and their known headings ``(0-based line, level, title)`` → tree of heading sections.

    Text before the first heading becomes a "Preface" root (the whole document, titled ``title``,
    when there is no heading). Node ranges are 1-based indexes into ``lines`` shifted by ``offset``,
    counted in ``unit`` (one unit per line).
    """
    roots: list[_Section] = []
    first = headings[0][0] if headings else len(lines)
    if any(ln.strip() for ln in lines[:first]):  # text before the first heading: a "Preface" root
        start = next(i for i in range(first) if lines[i].strip())
        name = PREFACE_TITLE if headings else (title or _first_words(lines[start]))
        roots.append(_Section(level=0, title=name, start=start, own_end=_trim_end(lines, start, first - 1),
                              heading_line=False))
    flat = [
        _Section(level=level, title=heading, start=line,
                 own_end=_trim_end(lines, line, (headings[k + 1][0] if k + 1 < len(headings) else len(lines)) - 1))
        for k, (line, level, heading) in enumerate(headings)
    ]
    roots.extend(_nest(flat))
    if not roots:
        roots.append(_Section(level=1, title=title or "Document", start=0, own_end=max(0, len(lines) - 1),
                              heading_line=False))
    return _finish(roots, lines, settings, offset, mode, list(warnings or []), unit)


def _first_words(line: str, n: int = 8) -> str:
    words = line.strip().lstrip("#").split()
    return " ".join(words[:n]) + (" …" if len(words) > n else "")


# --------------------------------------------------------------------------- plain text

_NUMBERED = re.compile(r"^((?:\d{1,3})(?:\.\d{1,3}){0,4})\.?\s+([A-Z0-9(\"'].{0,100})$")
_ROMAN = re.compile(r"^((?:[IVX]{1,5}|[A-Z])\.)\s+([A-Z].{0,100})$")
_END_PUNCT = (".", ",", ";", ":", "!", "?")
# Chinese report headings: 第一节 / 第二章 (parts), 一、 (sections), （一） (subsections), 1.1 (numbered); they need
# no blank line before them (Chinese reports rarely have one) but must be short and not end a sentence
_ZH_NUM = "一二三四五六七八九十百零〇"
_ZH_HEADINGS = (
    ("zhpart", re.compile(rf"^第[{_ZH_NUM}\d]{{1,4}}[节章篇]|^第[{_ZH_NUM}\d]{{1,4}}部分")),
    ("zh1", re.compile(rf"^[{_ZH_NUM}]{{1,3}}[、．.]\s*[\u4e00-\u9fff]")),
    ("zh2", re.compile(rf"^[（(][{_ZH_NUM}]{{1,3}}[）)]\s*[\u4e00-\u9fff]")),
    ("num2", re.compile(r"^\d{1,2}\.\d{1,2}(?!\.?\d)\s*[\u4e00-\u9fff]")),
    ("num3", re.compile(r"^\d{1,2}\.\d{1,2}\.\d{1,2}(?!\.?\d)\s*[\u4e00-\u9fff]")),
)
_ZH_END = ("。", "；", "，", "：", ":", ";", ",")
_ZH_STYLES = ("caps", "zhpart", "zh1", "zh2", "num1", "num2", "num3", "num4", "num5")


def _zh_heading(line: str) -> str | None:
    """The style of a Chinese heading line (``_ZH_HEADINGS``), or ``None``."""
    if len(line) > 40 or line.endswith(_ZH_END) or line.startswith("|"):
        return None
    return next((style for style, pattern in _ZH_HEADINGS if pattern.match(line)), None)
_SMALL_WORDS = {"a", "an", "and", "as", "at", "by", "for", "from", "in", "of", "on", "or", "the", "to", "with", "vs"}


def _is_caps(line: str) -> bool:
    letters = [c for c in line if c.isalpha()]
    return (
        len(letters) >= 3
        and all(c.isupper() for c in letters)
        and len(line) <= 80
        and len(line.split()) <= 10
        and not line.endswith((",", ";"))
    )


def _is_title_case(line: str) -> bool:
    words = line.split()
    if not 1 <= len(words) <= 10 or len(line) > 70 or line.endswith(_END_PUNCT):
        return False
    if not words[0][:1].isupper() or not re.search(r"[A-Za-z]{2}", line):
        return False
    content = [w for w in words if w.lower() not in _SMALL_WORDS]
    capital = [w for w in content if w[:1].isupper() or w[:1].isdigit()]
    return len(capital) >= max(1, 0.75 * len(content))


def _text_headings(lines: list[str]) -> list[tuple[int, str, str]]:
    """(0-based line, style, title): ALL CAPS, numbered ("1.", "1.2 Title") and short title-case lines."""
    found: list[tuple[int, str, str]] = []
    for i, raw in enumerate(lines):
        line = raw.strip()
        zh = _zh_heading(line) if line else None
        if zh:
            found.append((i, zh, line))
            continue
        if not line or (i > 0 and lines[i - 1].strip()):
            continue  # a heading starts a block
        next_blank = i + 1 >= len(lines) or not lines[i + 1].strip()
        m = _NUMBERED.match(line)
        if m and len(line.split()) <= 12 and not line.endswith(_END_PUNCT[:3]):
            found.append((i, f"num{m.group(1).count('.') + 1}", line))
        elif _ROMAN.match(line) and _is_caps(line):
            found.append((i, "caps", line))
        elif _is_caps(line):
            found.append((i, "caps", line))
        elif next_blank and _is_title_case(line) and i + 2 < len(lines):
            found.append((i, "title", line))
    return found


def _levels(found: list[tuple[int, str, str]]) -> dict[str, int]:
    styles = {s for _, s, _ in found}
    if styles & {"zhpart", "zh1", "zh2"}:  # Chinese: each style present one level below the one before
        levels = {style: depth for depth, style in enumerate((s for s in _ZH_STYLES if s in styles), start=1)}
        levels["title"] = len(levels) + 1
        return levels
    base = 1 if "caps" in styles else 0
    levels = {"caps": 1}
    depth = base
    for n in range(1, 6):
        if f"num{n}" in styles:
            depth = base + n
            levels[f"num{n}"] = depth
    levels["title"] = depth + 1 if styles - {"title"} else 1
    return levels


def build_text_tree(text: str, settings: IngestSettings, *, title: str) -> DocumentTree:
    """Plain text → one root node (the title) split at heading-like lines, else into paragraph windows."""
    lines = _split_lines(text.lstrip("\ufeff"))
    nonblank = sum(1 for ln in lines if ln.strip())
    found = _text_headings(lines)
    warnings: list[str] = []
    if len(found) < 2 or len(found) > max(4, nonblank * 0.5):
        found = []
    root = _Section(level=0, title=title, start=0, own_end=max(0, len(lines) - 1), heading_line=False)
    if found:
        levels = _levels(found)
        flat: list[_Section] = []
        for k, (line, style, heading) in enumerate(found):
            nxt = found[k + 1][0] if k + 1 < len(found) else len(lines)
            flat.append(_Section(level=levels[style], title=heading, start=line,
                                 own_end=_trim_end(lines, line, nxt - 1)))
        root.own_end = _trim_end(lines, 0, found[0][0] - 1) if found[0][0] > 0 else -1
        root.children = _nest(flat)
        mode_note = f"{len(found)} heading-like lines"
    else:
        window = max(_TEXT_WINDOW_MIN, min(_TEXT_WINDOW_MAX, settings.max_token_num_each_node))
        parts = _windows(lines, 0, len(lines) - 1, window) if nonblank else []
        if len(parts) >= 2:
            root.children = [
                _Section(level=1, title=f"Part {k}: {_first_words(lines[a])}", start=a, own_end=b, heading_line=False)
                for k, (a, b, _) in enumerate(parts, start=1)
            ]
            root.own_end = -1
        mode_note = f"{len(parts)} paragraph windows"
        warnings.append("no headings detected in text; split into paragraph windows")
    log.debug("ingest.text_sections", title=title, how=mode_note)
    return _finish([root], lines, settings, 0, "text", warnings)
