"""Writers for the comparison: Markdown, CSV, and one self-contained HTML page (inline SVG, no network).

The page is a list of ``Section``s: the ones that answer the run's question first (``lead_sections``, then the
answer ``analysis.report_sections`` chooses for the kind of run), the details and charts after them.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

# How each column is shown; CSV keeps more digits than the Markdown and HTML tables.
DISPLAY_DECIMALS = {
    "QPS": 1,
    "error %": 2,
    "% of failures": 1,
    "% of requests": 3,
    "QPS % of baseline": 1,
    "P99 ×": 2,
    "P99.9 ×": 2,
    "avg ×": 2,
    "RSS growth (MB)": 1,
    "db growth (MB)": 1,
    "client CPU (%)": 1,
}
CSV_DECIMALS = {
    "QPS": 3,
    "error %": 4,
    "% of failures": 4,
    "% of requests": 4,
    "RSS growth (MB)": 3,
    "db growth (MB)": 3,
}
LATENCY_DECIMALS = 3  # ms: the HDR histograms record microseconds
RATIO_DECIMALS = 4


def _decimals(column: str, for_csv: bool) -> int | None:
    if column.endswith("(ms)"):
        return LATENCY_DECIMALS
    if for_csv:
        return CSV_DECIMALS.get(column, RATIO_DECIMALS if column in DISPLAY_DECIMALS else None)
    return DISPLAY_DECIMALS.get(column)


def format_cell(column: str, value: object, decimals: dict[str, int] | None = None) -> str:
    """A table cell as text: fixed decimals per column (``decimals`` first), an empty cell for a missing value."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    places = (decimals or {}).get(column, _decimals(column, for_csv=False))
    if places is not None and isinstance(value, (int, float)):
        return f"{float(value):.{places}f}"
    return str(value)


def _is_numeric(table: pd.DataFrame, column: str) -> bool:
    return pd.api.types.is_numeric_dtype(table[column])


def markdown_table(table: pd.DataFrame, decimals: dict[str, int] | None = None) -> str:
    """A GitHub-flavoured Markdown table, numbers right-aligned; ``decimals`` overrides the decimals per column."""
    header = "| " + " | ".join(table.columns) + " |"
    rule = "|" + "|".join("---:" if _is_numeric(table, c) else "---" for c in table.columns) + "|"
    lines = [header, rule]
    for _, row in table.iterrows():
        cells = [format_cell(column, row[column], decimals).replace("|", "\\|") for column in table.columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown_notes(notes: list[str]) -> str:
    return "\n".join(["Notes:", *(f"- {note}" for note in notes)]) if notes else ""


def write_csv(table: pd.DataFrame, path: Path, decimals: dict[str, int] | None = None) -> None:
    rounded = table.copy()
    for column in rounded.columns:
        column_decimals = (decimals or {}).get(column, _decimals(column, for_csv=True))
        if column_decimals is not None and _is_numeric(rounded, column):
            rounded[column] = rounded[column].astype(float).round(column_decimals)
    rounded.to_csv(path, index=False)


def write_markdown(table: pd.DataFrame, notes: list[str], path: Path, title: str) -> None:
    parts = [f"# {title}", markdown_table(table), markdown_notes(notes)]
    path.write_text("\n\n".join(part for part in parts if part) + "\n", encoding="utf-8")


def html_table(table: pd.DataFrame, decimals: dict[str, int] | None = None) -> str:
    """An HTML table, numbers right-aligned; ``decimals`` overrides the decimals per column."""
    head = "".join(f"<th>{html.escape(str(column))}</th>" for column in table.columns)
    body = []
    for _, row in table.iterrows():
        cells = []
        for column in table.columns:
            css = ' class="num"' if _is_numeric(table, column) else ""
            cells.append(f"<td{css}>{html.escape(format_cell(column, row[column], decimals))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(body) + "\n</tbody>\n</table>"


_XML_PROLOG = re.compile(r"<\?xml[^>]*\?>|<!DOCTYPE[^>]*>", re.DOTALL)
_METADATA = re.compile(r"<metadata>.*?</metadata>", re.DOTALL)
# Namespace declarations are identifiers, not links, but a page that must never reach the network is easier to
# check without any URL in it; the HTML parser puts inline <svg> in the SVG namespace by itself.
_NAMESPACES = re.compile(r'\s+xmlns(:\w+)?="[^"]*"')


def inline_svg(path: Path) -> str:
    """The SVG file's markup, ready to paste into an HTML page."""
    svg = path.read_text(encoding="utf-8")
    svg = _NAMESPACES.sub("", _METADATA.sub("", _XML_PROLOG.sub("", svg)))
    return svg.strip()


_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1.5em 0; }
figure svg { max-width: 100%; height: auto; }
.notes li { margin: 0.2em 0; }
.wide { overflow-x: auto; }
.answer { font-size: 1.1em; font-weight: 600; }
.failed { color: #b00020; }
nav.contents { margin: 1em 0; line-height: 1.8; }
section { margin-bottom: 2em; }
"""


@dataclass(frozen=True)
class Section:
    """One part of report.html: a heading, an anchor for the contents and links, and its body as HTML fragments."""

    title: str
    body: tuple[str, ...]
    anchor: str = ""

    @property
    def id(self) -> str:
        return self.anchor or re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-") or "section"

    def html(self) -> str:
        heading = f"<h2>{html.escape(self.title)}</h2>"
        return "\n".join([f'<section id="{html.escape(self.id)}">', heading, *self.body, "</section>"])


def paragraphs(lines: Sequence[str], css: str = "") -> list[str]:
    """Each line as a paragraph of escaped text."""
    attribute = f' class="{css}"' if css else ""
    return [f"<p{attribute}>{html.escape(line)}</p>" for line in lines]


def notes_list(notes: Sequence[str]) -> list[str]:
    return ['<ul class="notes">', *(f"<li>{html.escape(note)}</li>" for note in notes), "</ul>"] if notes else []


def table_section(
    title: str,
    table: pd.DataFrame,
    notes: Sequence[str] = (),
    decimals: dict[str, int] | None = None,
    intro: Sequence[str] = (),
    anchor: str = "",
) -> Section:
    """A table with a line or two of text above it and its notes below."""
    body = [*paragraphs(intro), '<div class="wide">', html_table(table, decimals), "</div>", *notes_list(notes)]
    return Section(title, tuple(body), anchor)


def figure_section(caption: str, svg: Path, anchor: str = "") -> Section:
    """A chart, its SVG file inlined."""
    return Section(caption, ("<figure>", inline_svg(svg), "</figure>"), anchor)


def write_html(path: Path, title: str, sections: Sequence[Section], lead_sections: Sequence[Section] = ()) -> None:
    """One page: ``lead_sections`` first (a verdict that answers the question the runs were made for), then
    ``sections`` in their order, with the contents linking to each."""
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    ordered = [*lead_sections, *sections]
    contents = " · ".join(f'<a href="#{html.escape(s.id)}">{html.escape(s.title)}</a>' for s in ordered)
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p>Generated {generated}. Latencies in milliseconds; source <em>exact</em> = the tool's HDR histograms, "
        "<em>locust</em> = Locust's CSV (whole milliseconds).</p>",
        f'<nav class="contents">{contents}</nav>',
        *(section.html() for section in ordered),
    ]
    path.write_text(html_page(title, body), encoding="utf-8")


def html_page(title: str, body: list[str]) -> str:
    """A whole page around ``body`` with the report's style: no script, stylesheet link or image reference."""
    head = ["<!DOCTYPE html>", '<html lang="en">', '<head><meta charset="utf-8">']
    head += [f"<title>{html.escape(title)}</title>", f"<style>{_STYLE}</style>", "</head>", "<body>"]
    return "\n".join([*head, *body, "</body>", "</html>"]) + "\n"


def insert_section(path: Path, section: Section, title: str) -> None:
    """Put ``section`` first under the page's heading (written again, the previous one with its anchor replaced); a
    page of its own, through ``write_html``, when ``path`` does not exist yet."""
    if not path.is_file():
        write_html(path, title, [], lead_sections=[section])
        return
    page = path.read_text(encoding="utf-8")
    start = f'<section id="{html.escape(section.id)}">'
    if start in page:  # sections do not nest: the first end after the start closes it
        at = page.index(start)
        page = page[:at] + page[page.index("</section>", at) + len("</section>") :].lstrip("\n")
    # after the page's heading, or at the top of a page without one
    marker = "</h1>" if "</h1>" in page else "<body>"
    at = page.index(marker) + len(marker) if marker in page else 0
    page = page[:at] + "\n" + section.html() + "\n" + page[at:].lstrip("\n")
    path.write_text(page, encoding="utf-8")
