"""MkDocs hook: the option reference page gets its tables from the code at build time.

``docs/reference/options.md`` holds ``PLACEHOLDER``; ``render`` replaces it with ``etcd_users.__main__.markdown``,
every option group with its options, environment variables, defaults and meanings, each option with an anchor of
its own (``reference/options.md#etcd-endpoints``) to link to from any page. The generator runs in a child
process: importing the tool imports Locust, whose gevent monkey patching has no place in the MkDocs process.
"""

import subprocess
import sys
from pathlib import Path

PAGE = "reference/options.md"
PLACEHOLDER = "<!-- option tables: generated from the code at build time -->"
HEADING_LEVEL = 2
REPO = Path(__file__).resolve().parents[2]

GENERATE = f"from etcd_users.__main__ import markdown; print(markdown({HEADING_LEVEL}, anchors=True), end='')"


class ReferenceGenerationError(RuntimeError):
    """The reference could not be generated (the build must stop rather than publish a page without it)."""


def generated_reference() -> str:
    done = subprocess.run(
        [sys.executable, "-c", GENERATE], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0 or not done.stdout.strip():
        failed = f"etcd_users.__main__.markdown failed (exit code {done.returncode})"
        raise ReferenceGenerationError(f"{failed}:\n{done.stderr}")
    return done.stdout


def render(markdown: str) -> str:
    """The options page's Markdown with the generated tables in place of the placeholder."""
    if PLACEHOLDER not in markdown:
        lost = f"{PAGE} has lost its placeholder {PLACEHOLDER!r}"
        raise ReferenceGenerationError(f"{lost}: the option tables would be missing")
    return markdown.replace(PLACEHOLDER, generated_reference())


def on_page_markdown(markdown: str, page, **_kwargs) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    try:
        return render(markdown)
    except ReferenceGenerationError as error:
        from mkdocs.exceptions import PluginError

        raise PluginError(str(error)) from error
