"""Page highlights mark the cited passage where it stands (issue 40 item 1): its words aligned in order with the
page's, so a phrase the page repeats elsewhere is not marked there, and a passage the page no longer holds marks
nothing (no other text is marked instead)."""

from __future__ import annotations

from ingest.render import find_marks
from tests.pdfgen import SEGMENTS, segments_pdf


def test_the_cited_paragraph_is_marked_not_its_phrases_repeated_elsewhere() -> None:
    pdf, tops = segments_pdf()
    cited = ("Segment operating income of the Consumer segment was 101.5 million, up from the prior year on higher "
             "volumes and pricing. The Consumer segment employed 1201 people at the end of the year.")
    marks = find_marks(pdf, 1, cited)
    assert marks.marks.highlights == 3, marks  # its three lines, one box each
    assert all(tops["Consumer"] <= y0 and y1 < tops["Energy"] for _, y0, _, y1 in marks.boxes), (marks.boxes, tops)
    assert abs(marks.marks.top - tops["Consumer"] - 16 / 792) < 0.03


def test_a_passage_the_page_no_longer_holds_marks_nothing() -> None:
    pdf, _ = segments_pdf()
    stale = ("Segment operating income of the Aerospace segment was 87.0 million, down from the prior year on lower "
             "deliveries. The Aerospace segment closed two plants during the year.")
    marks = find_marks(pdf, 1, stale)
    assert marks.marks.highlights == 0 and marks.marks.top is None and marks.boxes == ()


def test_a_quote_marks_only_its_words_where_the_chunk_holds_them() -> None:
    """With the citation's quote, only the quoted sentence of the chunk is marked — found by its place in the
    chunk, so the same words elsewhere on the page stay unmarked."""
    pdf, tops = segments_pdf()
    chunk = " ".join(f"{name} segment Segment operating income of the {name} segment was {100 + i}.5 million, up "
                     f"from the prior year on higher volumes and pricing. The {name} segment employed {1200 + i} "
                     "people at the end of the year." for i, name in enumerate(SEGMENTS))
    marks = find_marks(pdf, 1, chunk, quote="The Consumer segment employed 1201 people at the end of the year.")
    assert marks.marks.highlights == 1, marks
    (_, y0, _, y1), = marks.boxes
    assert tops["Consumer"] < y0 and y1 < tops["Energy"], (marks.boxes, tops)
    assert find_marks(pdf, 1, chunk).marks.highlights == 12  # the whole chunk: every line of the three
