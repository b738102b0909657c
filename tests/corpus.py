"""A small generated corpus for end-to-end tests: reports of several companies and years.

Markdown reports carry front matter; one PDF report is written with pymupdf (one section per page)
so tests can check that citations point at the pages holding the cited text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pymupdf


@dataclass(frozen=True)
class Report:
    stem: str
    company: str
    year: int
    doc_type: str
    sections: tuple[tuple[str, str], ...]


FILLER = (
    "Management reviewed operating performance with the board during the year. The committee met quarterly "
    "and considered reports from internal audit, treasury and the sustainability office. "
)

REPORTS: tuple[Report, ...] = (
    Report("zephyr-mining-2021", "Zephyr Mining", 2021, "annual_report", (
        ("Letter to Shareholders", "Zephyr Mining closed fiscal 2021 with record copper output from the Atacama "
         "pit. " + FILLER),
        ("Financial Highlights", "Total revenue for fiscal 2021 was $412.7 million, up 18 percent. Operating "
         "margin reached 21.4 percent. Capital expenditure was $96.2 million. " + FILLER),
        ("Operations", "The Atacama pit produced 88,000 tonnes of copper concentrate. The Sierra smelter ran at 93 "
         "percent utilisation. " + FILLER),
        ("Risk Factors", "Copper prices, water rights in northern Chile and labour negotiations are the main risks. "
         + FILLER),
    )),
    Report("zephyr-mining-2022", "Zephyr Mining", 2022, "annual_report", (
        ("Letter to Shareholders", "Zephyr Mining faced lower copper prices in fiscal 2022. " + FILLER),
        ("Financial Highlights", "Total revenue for fiscal 2022 was $377.9 million, down 8 percent. Operating "
         "margin fell to 15.2 percent. Capital expenditure was $120.5 million. " + FILLER),
        ("Operations", "A new tailings facility was commissioned at the Atacama pit. " + FILLER),
        ("Debt", "The company refinanced its term loan; see Note 7 for the maturity schedule. " + FILLER),
        ("Note 7 — Borrowings", "The term loan of $150 million matures in 2027 and bears interest at SOFR plus "
         "2.1 percent. " + FILLER),
    )),
    Report("voltaic-devices-2023", "Voltaic Devices", 2023, "annual_report", (
        ("Letter to Shareholders", "Voltaic Devices designs consumer electronics and home energy storage. "
         + FILLER),
        ("Product Safety", "In March 2023 the company recalled 41,000 lithium battery packs sold with the "
         "PowerCube home unit after reports of overheating. The recall cost $12.3 million. " + FILLER),
        ("Financial Highlights", "Revenue for 2023 was $1.21 billion and net income was $84.0 million. " + FILLER),
        ("Outlook", "The company expects mid single digit growth in 2024 driven by storage products. " + FILLER),
    )),
    Report("kestrel-airlines-2020", "Kestrel Airlines", 2020, "annual_report", (
        ("Letter to Shareholders", "Kestrel Airlines is a regional carrier based in Norway. 2020 was shaped by "
         "travel restrictions. " + FILLER),
        ("Fleet Modernisation", "Kestrel retired eleven turboprops and ordered fourteen electric-hybrid aircraft "
         "for delivery from 2026, cutting fleet fuel burn by a planned 40 percent. " + FILLER),
        ("Financial Highlights", "Passenger revenue fell to NOK 2.9 billion and the company received NOK 600 "
         "million of state loan guarantees. " + FILLER),
    )),
)


def write_markdown(report: Report, folder: Path) -> Path:
    lines = ["---", f"title: {report.company} {report.year} Annual Report", f"company: {report.company}",
             f"doc_type: {report.doc_type}", f"fiscal_year: {report.year}", "---", "",
             f"# {report.company} {report.year} Annual Report", ""]
    for title, text in report.sections:
        lines += [f"## {title}", "", text, "", text.replace("during the year", "in the period"), ""]
    path = folder / f"{report.stem}.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def write_pdf(report: Report, folder: Path) -> Path:
    """One section per page; heading in a larger bold font; an embedded outline."""
    doc = pymupdf.open()
    toc = []
    for i, (title, text) in enumerate(report.sections, 1):
        page = doc.new_page()
        page.insert_text((72, 80), title, fontsize=18, fontname="helv")
        rect = pymupdf.Rect(72, 100, 540, 760)
        page.insert_textbox(rect, (text + "\n\n") * 3, fontsize=10, fontname="helv")
        toc.append([1, title, i])
    doc.set_toc(toc)
    path = folder / f"{report.stem}.pdf"
    doc.save(path)
    doc.close()
    return path


def build_corpus(folder: Path, *, pdf_stems: tuple[str, ...] = ("voltaic-devices-2023",)) -> list[Path]:
    """Write every report (PDF for ``pdf_stems``, Markdown otherwise) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for r in REPORTS:
        out.append(write_pdf(r, folder) if r.stem in pdf_stems else write_markdown(r, folder))
    return out
