"""Companies as questions name them and as reports write them: former names read at ingest join a renamed
company's reports into one entity."""

from __future__ import annotations

import json
from pathlib import Path

from ingest.metadata import other_names
from kb.runtime import Runtime, build_pipeline
from router.metadata import KnownValues, company_index, renamed_companies
from router.scope import classify_scope
from router.types import QueryRequest
from tests.conftest import ingest
from tests.http import wire


def test_other_names_a_report_states_for_its_own_company() -> None:
    text = ("On August 10, 2022 we changed our corporate name from Synalloy Corporation to Ascent Industries Co., "
            "effective immediately. The board approved an amendment to change the name of the Company to "
            "“AMERICAN BATTERY MATERIALS, INC.” (the “Name Change”). Clean Energy Technologies, Inc. (formerly "
            "Probe Manufacturing, Inc.) designs heat recovery systems. Merger Sub changed its name to Foo LLC.")
    assert other_names(text, "Ascent Industries Co.") == [
        "Synalloy Corporation", "American Battery Materials, Inc."]  # its own name is not another name
    assert other_names(text, "Clean Energy Technologies, Inc.")[-1] == "Probe Manufacturing, Inc."
    assert other_names(text, None) == []
    assert other_names("Acme Inc. reported revenue.", "Acme Inc.") == []


def test_renamed_companies_are_one_entity() -> None:
    groups, extra = renamed_companies([("Ascent Industries Co.", ["Synalloy Corporation"]),
                                       ("SYNALLOY CORP", []), ("Boxscore Brands, Inc.", ["U-Vend Inc"]),
                                       ("Delta Marine", [])])
    assert groups["SYNALLOY CORP"] == groups["Ascent Industries Co."] == ("Ascent Industries Co.", "SYNALLOY CORP")
    assert "Delta Marine" not in groups and extra == {"Boxscore Brands, Inc.": ["U-Vend Inc"]}
    values = {"Ascent Industries Co.": 2, "SYNALLOY CORP": 3, "Boxscore Brands, Inc.": 4, "Delta Marine": 1}
    kv = KnownValues(values={"company": values}, doc_count=10, groups=groups,
                     companies={"company": company_index("company", values, extra)})
    trend = classify_scope("How has Ascent Industries' net income changed over time?", kv)
    assert trend.kind == "multi" and trend.series and set(trend.entities) == {"Ascent Industries Co.", "SYNALLOY CORP"}
    one = classify_scope("What was Ascent Industries' net income in 2023?", kv)
    assert one.kind == "single", one.reason  # two names, one company
    assert classify_scope("What was U-Vend's revenue?", kv).entities == ("Boxscore Brands, Inc.",)
    two = classify_scope("Compare the revenue of Ascent Industries and Delta Marine.", kv)
    assert two.kind == "multi" and "names 2 entities" in two.reason


def _report(company: str, year: int, revenue: str, extra: str = "") -> str:
    return (f"UNITED STATES SECURITIES AND EXCHANGE COMMISSION\nWashington, D.C. 20549\n\nFORM 10-K\n\n"
            f"ANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934\n\n"
            f"For the fiscal year ended December 31, {year}\n\n{company}\n"
            f"(Exact name of registrant as specified in its charter)\n\n"
            f"Item 1. Business\n\n{company} makes industrial robots. {extra}\n\n"
            f"Item 7. Management's Discussion and Analysis\n\nTotal revenue for {year} was {revenue}.\n")


async def test_a_renamed_company_s_reports_answer_its_trend(runtime: Runtime, tmp_path: Path) -> None:
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "quill-2021.txt").write_text(_report("QUILL HOLDINGS, INC.", 2021, "$100.0 million"))
    (folder / "nova-2023.txt").write_text(_report(
        "Nova Robotics Corp.", 2023, "$300.0 million",
        "In 2022 the Company changed its corporate name from Quill Holdings, Inc. to Nova Robotics Corp."))
    (folder / "delta-2023.txt").write_text(_report("Delta Marine Corporation", 2023, "$42.0 million"))
    status = await ingest(runtime, folder)
    assert status.counts.get("ok") == 3, status
    meta = {r["name"]: json.loads(r["metadata"]) for r in await runtime.pool.fetch("SELECT name, metadata FROM documents")}
    assert meta["nova-2023.txt"]["also_known_as"] == ["Quill Holdings, Inc."]
    result = await build_pipeline(runtime).run(QueryRequest(query="How has Nova Robotics' revenue changed over time?"))
    scope = wire(result.trace)["scope"]
    assert scope["kind"] == "multi", scope
    assert {n["name"] for n in scope["needed"]} == {"quill-2021.txt", "nova-2023.txt"}
    assert all(n["evidence"] >= 1 for n in scope["needed"])
