"""Document metadata from four layers: a folder file, a sidecar, Markdown front matter, and
automatic extraction from the first pages (offline heuristics tuned on SEC cover pages).

Precedence (``merge_metadata``): folder file > sidecar > front matter > automatic.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
import structlog

from ingest.files import read_confined
from ingest.formats import SUPPORTED
from kb.core import lexicon, vocab
from kb.core.errors import IngestError
from kb.core.text import jsonl_objects

log = structlog.get_logger("ingest.metadata")

KEY_FIELDS = ("file", "filename", "doc_name", "name")
"""Row fields that name the document a folder-metadata row belongs to (first present wins)."""


class DocMetadata(msgspec.Struct, frozen=True):
    """Merged metadata and, per key, the layer it came from."""

    values: dict[str, Any]
    sources: dict[str, str]


# --------------------------------------------------------------------------- merging


def _present(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, str | list | tuple | dict) and len(value) == 0:
        return False
    return not (isinstance(value, str) and not value.strip())


def merge_with_sources(layers: Sequence[tuple[str, Mapping[str, Any]]]) -> DocMetadata:
    """Merge named layers; earlier layers win. Empty values never override."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for source, layer in layers:
        for key, value in layer.items():
            if key in values or not _present(value):
                continue
            values[key] = value
            sources[key] = source
    return DocMetadata(values=values, sources=sources)


def merge_metadata(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Merge metadata layers; earlier layers win (folder file > sidecar > front matter > automatic)."""
    return merge_with_sources([(f"layer{i}", layer) for i, layer in enumerate(layers)]).values


# --------------------------------------------------------------------------- folder files and sidecars


def doc_key(name: str) -> str:
    """The key folder metadata is matched on: the file name without directory and document extension
    (a suffix of ``ingest.formats.SUPPORTED``)."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1].strip()
    lower = base.lower()
    for ext in SUPPORTED:
        if lower.endswith(ext):
            return base[: -len(ext)]
    return base


def _coerce_csv(value: str) -> Any:
    text = value.strip()
    if re.fullmatch(r"-?\d{1,15}", text):
        return int(text)
    if re.fullmatch(r"-?\d+\.\d+", text):
        return float(text)
    return text


def _rows_to_mapping(rows: Iterable[tuple[int, dict[str, Any]]], source: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for line_no, row in rows:
        key_field = next((k for k in KEY_FIELDS if _present(row.get(k))), None)
        if key_field is None:
            log.warning("ingest.metadata_row_without_name", file=str(source), line=line_no, fields=KEY_FIELDS)
            continue
        key = doc_key(str(row[key_field]))
        values = {k: v for k, v in row.items() if k not in ("file", "filename") and _present(v)}
        if key in out:
            log.warning("ingest.metadata_duplicate_row", file=str(source), line=line_no, key=key)
        out[key] = values
    return out


def _read_jsonl(path: Path, text: str) -> dict[str, dict[str, Any]]:
    stripped = text.lstrip()
    if path.suffix.lower() == ".json" and stripped[:1] in "[{":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise IngestError(f"{path.name}: invalid JSON: {exc}") from exc
        if isinstance(data, dict):  # {"name": {...}, ...}
            data = [{"name": k, **v} for k, v in data.items() if isinstance(v, dict)]
        if not isinstance(data, list):
            raise IngestError(f"{path.name}: expected a JSON list of objects")
        return _rows_to_mapping(((i + 1, r) for i, r in enumerate(data) if isinstance(r, dict)), path)
    return _rows_to_mapping(list(jsonl_objects(text, path.name, IngestError)), path)


def _read_csv(path: Path, text: str) -> dict[str, dict[str, Any]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows = [
        (i + 2, {(k or "").strip(): _coerce_csv(v) for k, v in row.items() if k and v is not None and v.strip()})
        for i, row in enumerate(reader)
    ]
    return _rows_to_mapping(rows, path)


def _read_metadata_file(path: Path, allowed_root: Path | None = None) -> dict[str, dict[str, Any]]:
    suffix = path.suffix.lower()
    try:
        if suffix in (".jsonl", ".ndjson", ".json", ".csv"):
            text = read_confined(path, allowed_root).decode("utf-8-sig")
        if suffix in (".jsonl", ".ndjson", ".json"):
            return _read_jsonl(path, text)
        if suffix == ".csv":
            return _read_csv(path, text)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise IngestError(f"{path.name}: cannot read metadata file: {exc}") from exc
    raise IngestError(f"{path.name}: metadata file must be .jsonl, .json or .csv")


def load_folder_metadata(folder: Path, explicit: Path | None = None,
                         allowed_root: Path | None = None) -> dict[str, dict[str, Any]]:
    """Metadata rows keyed by file stem, from ``explicit`` or ``folder/metadata.jsonl`` / ``metadata.csv``.

    Rows name their document with ``file``/``filename``/``doc_name``/``name`` (FinanceBench's
    ``documents.jsonl`` works as an explicit file). When both folder files exist, jsonl rows win.
    With ``allowed_root`` each file's real path must lie inside it.
    """
    if explicit is not None:
        return _read_metadata_file(explicit, allowed_root)
    merged: dict[str, dict[str, Any]] = {}
    for name in ("metadata.csv", "metadata.jsonl"):  # later wins per key
        path = folder / name
        if path.is_file():
            for key, row in _read_metadata_file(path, allowed_root).items():
                merged[key] = {**merged.get(key, {}), **row}
    return merged


def read_sidecar(path: Path, allowed_root: Path | None = None) -> dict[str, Any]:
    """Metadata from ``<file>.meta.json`` (e.g. ``report.pdf.meta.json``) or ``<stem>.meta.json``; {} if none.

    With ``allowed_root`` the sidecar's real path must lie inside it, like the file's."""
    for candidate in (path.with_name(path.name + ".meta.json"), path.with_name(path.stem + ".meta.json")):
        if not candidate.is_file():
            continue
        try:
            data = json.loads(read_confined(candidate, allowed_root).decode("utf-8-sig"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise IngestError(f"{candidate.name}: invalid JSON sidecar: {exc}") from exc
        if not isinstance(data, dict):
            raise IngestError(f"{candidate.name}: sidecar must hold a JSON object")
        return data
    return {}


# --------------------------------------------------------------------------- automatic extraction

_EXACT_NAME = re.compile(r"\(?\s*exact\s+name\s+of\s+(?:the\s+)?registrant", re.I)
_COMMISSION = re.compile(r"commission\s+file\s+(?:number|no)", re.I)
_CORP_WORDS = (
    r"Inc\.?|Incorporated|Corporation|Corp\.?|Company|Co\.|PLC|plc|Ltd\.?|Limited|LLC|L\.?P\.|N\.V\.|S\.A\.|AG|SE"
    r"|GmbH|Group|Holdings"
)
_NAME_LINE = re.compile(
    rf"^(?!(?:Our|Your|This|That|A|An|Each|Every|About|Why|How|What)\b)([A-Z0-9][\w.&'’-]*(?:,?\s+[A-Z0-9&][\w.&'’-]*){{0,5}}),?\s+({_CORP_WORDS})$"
)
_SUFFIX_WORD = rf"(?:{_CORP_WORDS}|INC\.?|CORPORATION|COMPANY|CORP\.?|LIMITED|LTD\.?|PARTNERSHIP|L\.?L\.?C\.?|LP|TRUST)"
_SUFFIX_ONLY = re.compile(rf"^{_SUFFIX_WORD}(?:,?\s+{_SUFFIX_WORD})*,?$", re.I)
"""A cover line holding only legal-form words ("LIMITED PARTNERSHIP", "Inc."): the end of a name wrapped over
lines, which the line above begins."""
_NOT_TICKER = {
    "YES", "NO", "USA", "US", "ADS", "ADR", "NV", "SA", "AG", "LP", "NYSE", "NASDAQ", "LLC", "INC", "N/A", "NONE",
    "THE", "PLC", "AND", "CLASS", "ARCA", "CBOE", "NA", "NEW", "YORK", "STOCK", "EXCHANGE", "GLOBAL", "SELECT",
    "MARKET", "PAR", "VALUE", "PER", "SHARE", "NOTES", "DUE", "OF", "ON", "EACH", "NAME", "TITLE", "CORP", "CO",
}
_KEEP_UPPER = {"PLC", "LLC", "LP", "USA", "US", "NV", "SA", "AG", "SE", "UK", "II", "III", "IV", "IBM", "N.V.",
               "S.A.", "L.P.", "L.L.C.", "U.S.", "AT&T"}


def _nominal_month(d: dt.date) -> tuple[int, int]:
    """(year, month) a period end belongs to; 52/53-week years end up to a week into the next month."""
    if d.day <= 7:
        prev = d.replace(day=1) - dt.timedelta(days=1)
        return prev.year, prev.month
    return d.year, d.month


def _smart_case(name: str) -> str:
    """Title-case an ALL-CAPS company name ("MICROSOFT CORPORATION" → "Microsoft Corporation")."""
    if any(c.islower() for c in name):
        return name
    words = []
    for word in name.split():
        core = word.strip(",.")
        if core in _KEEP_UPPER or word in _KEEP_UPPER or any(c.isdigit() for c in word) or "&" in word:
            words.append(word)
        elif len(core) <= 2 and core.isalpha() and core not in {"CO", "OF"}:
            words.append(word)
        else:
            parts = word.split(".")
            words.append(".".join([parts[0].capitalize(), *(p.lower() for p in parts[1:])]))
    out = " ".join(words)
    return re.sub(r"\bOf\b", "of", out)


def _clean_name(name: str) -> str:
    name = re.sub(r"\s+", " ", name).strip(" ,;:_-")
    name = re.sub(r"\s+([.,])", r"\1", name)  # "NIKE, Inc ." → "NIKE, Inc."
    return _smart_case(name)


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not re.fullmatch(r"[_\-=\s]+", ln.strip())]


def _bad_name_line(line: str) -> bool:
    low = line.lower()
    return (
        len(line) > 80
        or len(line) < 2
        or bool(re.search(r"commission|file n|\d{3}-\d|\(|\)|registrant|pursuant|washington|report|period", low))
        or bool(re.fullmatch(r"[\d\s.,:/-]+", line))
    )


def _company_from_cover(lines: list[str]) -> str | None:
    for i in range(min(120, len(lines))):
        window = " ".join(lines[i : i + 3])
        if not _EXACT_NAME.match(window):
            continue
        parts: list[str] = []
        j = i - 1
        while j >= 0 and len(parts) < 3 and not _bad_name_line(lines[j]):
            parts.insert(0, lines[j])
            if not _SUFFIX_ONLY.match(lines[j]) and not lines[j].endswith(","):
                break
            j -= 1
        if parts:
            return _clean_name(" ".join(parts))
    for i, line in enumerate(lines[:80]):  # no "(Exact name…)" caption: the line after the file number
        if _COMMISSION.search(line):
            for cand in lines[i + 1 : i + 3]:
                if not _bad_name_line(cand) and re.search(r"[A-Za-z]{2}", cand):
                    return _clean_name(cand)
            break
    return None


def _ticker(lines: list[str]) -> str | None:
    """First ticker in the cover page's "Securities registered pursuant to Section 12(b)" table."""
    start = next((i for i, ln in enumerate(lines[:200]) if re.search(r"section\s+12\s*\(b\)", ln, re.I)), None)
    if start is None:
        return None
    end = next(
        (j for j in range(start + 1, min(len(lines), start + 80))
         if re.search(r"section\s+12\s*\(g\)|indicate by check", lines[j], re.I)),
        min(len(lines), start + 40),
    )
    block = lines[start + 1 : end]
    if not any(re.search(r"trading\s+symbol", ln, re.I) for ln in block):
        return None
    for cand in block:
        if re.search(r"trading\s+symbol|title of each class|name of each exchange", cand, re.I):
            continue
        token = cand.strip()
        if re.fullmatch(r"[A-Z]{1,5}(?:\.[A-Z])?", token) and token not in _NOT_TICKER:
            return token
        words = cand.split()  # table rows merged into one line: "Common Stock … AAPL The Nasdaq …"
        for i, word in enumerate(words):
            if not re.fullmatch(r"[A-Z]{2,5}(?:\.[A-Z])?", word) or word in _NOT_TICKER:
                continue
            neighbours = [words[j] for j in (i - 1, i + 1) if 0 <= j < len(words)]
            if any(re.fullmatch(r"[A-Z]{2,}", w) and w not in _NOT_TICKER for w in neighbours):
                continue  # part of an all-caps phrase ("NEW YORK STOCK EXCHANGE")
            if i > 0 and words[i - 1].lower() in ("class", "series"):
                continue
            return word
    return None


def _quarterly(flat: str, end: dt.date, meta: dict[str, Any]) -> None:
    """Fiscal year/quarter of a 10-Q: YTD columns ("Nine Months Ended") give the fiscal quarter."""
    ytd = [vocab.YTD_QUARTERS[m.group(1).lower()] for m in vocab.YTD.finditer(flat)]
    year, month = _nominal_month(end)
    if ytd:
        quarter = max(ytd)
        fye_index = year * 12 + (month - 1) + 3 * (4 - quarter)
        meta["fiscal_quarter"] = quarter
        meta["fiscal_year"] = fye_index // 12
        return
    explicit = vocab.fiscal_quarter(flat)
    if explicit:
        meta["fiscal_quarter"], meta["fiscal_year"] = explicit
        return
    meta["fiscal_quarter"] = (month - 1) // 3 + 1  # no fiscal calendar in the text: calendar quarter
    meta["fiscal_year"] = year
    log.debug("ingest.metadata_calendar_quarter_assumed", period_end=end.isoformat())


def _long_date(d: dt.date) -> str:
    return f"{d:%B} {d.day}, {d.year}"


def _good_title(title: str | None) -> bool:
    if not title:
        return False
    t = title.strip()
    low = t.lower()
    return (
        len(t.split()) >= 2
        and not re.search(r"\.(pdf|docx?|md|txt)$|^microsoft word|^untitled|^document\d*$", low)
        and low not in {"preface", "table of contents", "contents", "cover page", "cover"}
    )


def extract_metadata(first_pages_text: str, *, file_name: str, title_hint: str | None = None) -> dict[str, Any]:
    """Offline metadata from a document's first pages (never from the file name).

    Keys when found: ``company``, ``ticker``, ``doc_type`` ("10k", "10q", "8k", "earnings",
    "annual_report", …), ``form``, ``period_end_date`` (ISO), ``fiscal_year``, ``fiscal_quarter``,
    ``doc_period`` (the fiscal year, like FinanceBench), ``report_date`` (8-K), ``title``.
    Pass the first ~8 pages: a 10-Q's fiscal quarter is read from its statements' "Three/Six/Nine
    Months Ended" headers (pages 3–6); with the cover page only, the calendar quarter is assumed.
    ``file_name`` is used for logging only.
    """
    text = first_pages_text or ""
    lines = _lines(text)
    flat = " ".join(text.split())
    head = " ".join(" ".join(lines[:60]).split())
    meta: dict[str, Any] = {}

    form_match = vocab.FORM.search("\n".join(lines[:60]))
    form = form_match.group(1).upper().replace(" ", "") if form_match else None
    if form is None and (pursuant := vocab.REPORT_PURSUANT.search(head)):
        form = vocab.COVER_REPORT_FORMS[pursuant.group(1).upper()]
    if form:
        meta["form"] = vocab.FORM_NAMES.get(form, form)
        meta["doc_type"] = vocab.form_doc_type(form)
        company = _company_from_cover(lines)
        if company:
            meta["company"] = company
        ticker = _ticker(lines)
        if ticker:
            meta["ticker"] = ticker

    fy = vocab.FISCAL_YEAR_ENDED.search(flat[:6000])
    qe = vocab.QUARTER_ENDED.search(flat[:6000])
    dates = vocab.cover_date(meta.get("doc_type"))
    if dates == "quarter_end" and qe:
        end = vocab.parse_date(*qe.groups())
        if end:
            meta["period_end_date"] = end.isoformat()
            _quarterly(flat, end, meta)
    elif fy and (meta.get("doc_type") is None or dates == "year_end"):
        end = vocab.parse_date(*fy.groups())
        if end:
            meta["period_end_date"] = end.isoformat()
            meta["fiscal_year"] = _nominal_month(end)[0]
            meta.setdefault("doc_type", vocab.UNFORMED_ANNUAL)
    elif dates == "report_date":
        rd = vocab.DATE_OF_REPORT.search(flat[:4000]) or vocab.DATE_RE.search(head)
        if rd:
            date = vocab.parse_date(*rd.groups()[-3:])
            if date:
                meta["report_date"] = date.isoformat()
                meta["doc_period"] = date.year

    if form is None and _CJK.search(text[:4000]) and _chinese(text, file_name, meta):
        pass  # an A-share report: its cover's 证券简称 / 证券代码 and its title's period
    elif form is None:
        _non_sec(lines, meta)
    if "fiscal_year" in meta:
        meta["doc_period"] = meta["fiscal_year"]

    title = _title(meta, lines, title_hint)
    meta.pop("headline", None)
    if title:
        meta["title"] = title
    log.debug("ingest.metadata_extracted", file=file_name, keys=sorted(meta))
    return meta


_CJK = re.compile(r"[\u4e00-\u9fff]{4}")
_ZH_FILE = re.compile(r"(?<!\d)(\d{6})(?!\d)[-_ ]+(?:(?:19|20)\d{2}[-_ ]+)?(\*?(?:ST)?[\u4e00-\u9fff]{2,8}[A-Z]?)(?=[-_ ])")
_ZH_PREPARER = re.compile(r"编制单位\s*[:：]\s*([\u4e00-\u9fff（）()]{4,40}?(?:公司|集团))")


def _chinese(text: str, file_name: str, meta: dict[str, Any]) -> bool:
    """A Chinese listed company's report: company (证券简称, else the short name in an exchange-style file name
    "002304-2015-洋河股份-…"), stock code, full name (the title line, or 编制单位) as ``also_known_as``, and the
    period and type of its title ("2024年第一季度报告"), from the text else the file name. False when none of
    it is there."""
    head = text[:20000]
    named = _ZH_FILE.search(file_name)
    if code := vocab.ZH_CODE.search(head):
        meta["ticker"] = code.group(1)
    if short := vocab.ZH_SHORT_NAME.search(head):
        meta["company"] = short.group(1)
    elif named:
        meta["company"] = named.group(2)
    if named and "ticker" not in meta:
        meta["ticker"] = named.group(1)
    title_line = next((ln for ln in head.splitlines()[:40] if vocab.ZH_REPORT.search(ln)), "")
    full = vocab.ZH_FULL_NAME.search(title_line) or _ZH_PREPARER.search(head)
    if full and full.group(1) != meta.get("company"):
        meta["also_known_as"] = [full.group(1)]
        meta.setdefault("company", full.group(1))
    period = vocab.zh_report_period(head) or vocab.zh_report_period(file_name)
    if period:
        year, quarter, end = period
        meta["fiscal_year"], meta["doc_period"], meta["period_end_date"] = year, year, end
        if 0 < quarter < 4:
            meta["fiscal_quarter"] = quarter
        meta["doc_type"] = "annual_report" if quarter == 0 else "semiannual_report" if (
            "半年" in head[:3000] or "半年" in file_name) and quarter == 2 else "quarterly_report"
        span = {0: "年度报告", 1: "第一季度报告", 2: "半年度报告", 3: "第三季度报告"}.get(quarter, "报告")
        if meta.get("company"):
            meta["title"] = f"{meta['company']} {year}年{span}"
    return bool(meta.get("company") or period)


def _non_sec(lines: list[str], meta: dict[str, Any]) -> None:
    """Earnings releases, annual reports and other documents without an SEC form header."""
    head_lines = [ln.lstrip("#").strip() for ln in lines[:40]]
    for line in head_lines[:5]:
        for pattern, name in vocab.HEADLINES:
            if m := pattern.match(line):
                _headline(m, name, line, meta)
                return
    joined = " ".join(head_lines[:15])
    for pattern, name in vocab.HEAD_WORDS:
        if words := pattern.search(joined):
            meta["doc_type"] = name
            stated = words.group(1) if words.re.groups else None
            year = stated or (m.group(1) if (m := vocab.YEAR.search(joined)) else None)
            if year:
                meta["fiscal_year"] = int(year)
            break
    if "company" not in meta:
        for line in head_lines[:30]:
            m = _NAME_LINE.match(line)
            if m and len(line.split()) <= 8:
                meta["company"] = _clean_name(line)
                break


def _headline(m: re.Match[str], name: str, line: str, meta: dict[str, Any]) -> None:
    """Company, type, fiscal year and quarter from a "<Company> reports … results" headline."""
    meta["company"] = _clean_name(m.group("company"))
    meta["doc_type"] = name
    meta["headline"] = line
    rest = m.group("rest")
    year = vocab.FISCAL_YEAR_WORDS.search(rest) or vocab.YEAR.search(rest)
    if year:
        meta["fiscal_year"] = int(year.group(1))
    quarter = vocab.QUARTER_NAMED.search(rest)
    if quarter:
        meta["fiscal_quarter"] = (lexicon.QUARTER_WORDS[quarter.group(1).lower()] if quarter.group(1)
                                  else int(quarter.group(2)))


def _title(meta: Mapping[str, Any], lines: list[str], hint: str | None) -> str | None:
    company = meta.get("company")
    form = meta.get("form")
    if form and company:
        declared = vocab.doc_type(meta.get("doc_type"))
        if declared and declared.title_phrase and meta.get("period_end_date"):
            end = dt.date.fromisoformat(meta["period_end_date"])
            return f"{company} Form {form} {declared.title_phrase} {_long_date(end)}"
        if meta.get("report_date"):
            return f"{company} Form {form} dated {_long_date(dt.date.fromisoformat(meta['report_date']))}"
        return f"{company} Form {form}"
    if meta.get("headline"):
        return str(meta["headline"])
    if _good_title(hint):
        return str(hint).strip()
    for line in lines[:40]:  # a Markdown title
        m = re.match(r"^#{1,2}\s+(.+?)\s*#*$", line)
        if m and re.search(r"[A-Za-z]{2}", m.group(1)):
            return m.group(1)
    for line in lines[:10]:
        if re.match(r"^(?:<|!\[|\[|\||```|~~~|---)", line):
            continue
        cand = line.lstrip("#").strip()
        if 2 <= len(cand.split()) <= 16 and re.search(r"[A-Za-z]{3}", cand) and not cand.endswith((",", ";")):
            return cand
    return None


_Q = "[\"“”']?"
_NAME = r"[A-Z][\w&.,'’\- ]{1,78}?"
_REGISTRANT = r"(?:the|our|its) (?:corporate |legal |company )?name(?: of (?:the|our) (?:Company|company|Registrant))?"
_NAME_CHANGES = (
    # "changed our corporate name from Synalloy Corporation to Ascent Industries Co., effective …"
    re.compile(rf"\bchang(?:e|ed|ing) {_REGISTRANT} from {_Q}(?P<old>{_NAME}){_Q} to {_Q}(?P<new>{_NAME}){_Q}"
               r"(?=\s*(?:[,;(]|\.(?:\s|$)|effective|\(the|$))"),
    # "… to change the name of the Company to “AMERICAN BATTERY MATERIALS, INC.” (the “Name Change”)"
    re.compile(rf"\bchang(?:e|ed|ing) {_REGISTRANT} to [\"“](?P<new>[^\"“”]{{3,80}})[\"”]"),
)


def _matches_at(pattern: re.Pattern[str], text: str, literal: str) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text)`` for a pattern whose every match starts with ``literal``: tried only where
    ``literal`` occurs (a pattern opening with ``\\b`` is otherwise tried at every character of a long filing)."""
    pos = 0
    while (i := text.find(literal, pos)) >= 0:
        m = pattern.match(text, i)
        if m:
            yield m
        pos = m.end() if m and m.end() > i else i + 1


def _name_end(name: str) -> str:
    """A name cut out of a sentence without the sentence's punctuation ("Inc." keeps its period)."""
    name = name.strip(" ,;")
    if name.endswith(".") and not re.search(r"\b(?:inc|corp|co|ltd|l\.p|n\.v|s\.a)\.$", name, re.I):
        name = name[:-1]
    return name


def other_names(text: str, company: str | None) -> list[str]:
    """Other names of the document's own company that the document states: the name it changed from or to
    ("changed our corporate name from Synalloy Corporation to Ascent Industries Co.", "change the name of the
    Company to “AMERICAN BATTERY MATERIALS, INC.”") and "<company> (formerly <name>)". The router treats them
    as one entity across the reports that carry either name."""
    if not company:
        return []
    own = vocab.company_core(company)
    found: list[str] = []
    for pattern in _NAME_CHANGES:
        for m in _matches_at(pattern, text, "chang"):
            found.extend(g for g in m.groupdict().values() if g)
    formerly = re.compile(rf"{re.escape(company.split(',')[0])}[^()\n]{{0,20}}\((?:formerly|f/k/a)(?: known as)?"
                          rf"\s+{_Q}(?P<old>[^()\"“”]{{3,80}}){_Q}\)", re.I)
    found.extend(m.group("old") for m in formerly.finditer(text))
    names = [_smart_case(re.sub(r"\s+and (?:its )?subsidiaries$", "", _name_end(n), flags=re.I)) for n in found]
    by_core = {vocab.company_core(n): n for n in reversed(names) if n}
    return [n for core, n in reversed(by_core.items()) if core and core != own][:5]
