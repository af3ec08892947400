"""The option reference of the documentation lists every option the code declares.

The reference page is generated at build time by ``docs/hooks/reference.py``; these tests render the page as the
build does and compare it with the ``--etcd-*`` and ``--shape-*`` flags of Locust's own parser once the tool has
registered its options, so an option added to the code but missing from the generated reference fails here.
"""

import locust  # noqa: F401  (gevent patching before anything else loads: Locust's parser is built below)
from locust import events
from locust.argument_parser import get_parser

import importlib.util
import re
from pathlib import Path

import pytest

import etcd_users.shapes.options  # noqa: F401  (registers the --shape-* options)
import etcd_users.users  # noqa: F401  (registers the --etcd-* options)

REPO = Path(__file__).resolve().parents[2]
HOOK = REPO / "docs" / "hooks" / "reference.py"
FLAG = re.compile(r"^--(etcd|shape)-[a-z0-9-]+$")


def load_hook():
    spec = importlib.util.spec_from_file_location("docs_reference_hook", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tool_flags() -> set[str]:
    """Every --etcd-*/--shape-* flag of the parser Locust builds for a run (its init_command_line_parser fired)."""
    parser = get_parser()
    return {flag for action in parser._actions for flag in action.option_strings if FLAG.match(flag)}


def documented_flags(page: str) -> set[str]:
    """The flags the rendered reference lists in its option column (`--flag` at the start of a table row)."""
    return set(re.findall(r"^\| `(--[a-z0-9-]+)` \|", page, flags=re.MULTILINE))


def missing_from_reference(flags: set[str], page: str) -> list[str]:
    return sorted(flags - documented_flags(page))


@pytest.fixture(scope="module")
def hook():
    return load_hook()


@pytest.fixture(scope="module")
def rendered(hook) -> str:
    source = (REPO / "docs" / hook.PAGE).read_text()
    return hook.render(source)


def test_the_reference_page_lists_every_option_of_the_parser(rendered):
    flags = tool_flags()
    assert "--etcd-endpoints" in flags and "--shape-time-scale" in flags, "the tool's options must be registered"
    assert missing_from_reference(flags, rendered) == []


def test_each_option_has_its_environment_variable_and_the_placeholder_is_gone(hook, rendered):
    assert hook.PLACEHOLDER not in rendered
    for flag in tool_flags():
        variable = "LOCUST_" + flag.removeprefix("--").replace("-", "_").upper()
        assert f"| `{flag}` | `{variable}` |" in rendered, flag


def test_an_option_added_to_the_parser_only_is_reported_missing(rendered):
    def add_undocumented(parser, **_kwargs):
        parser.add_argument("--etcd-undocumented-knob", default=1, help="declared nowhere the reference reads")

    events.init_command_line_parser.add_listener(add_undocumented)
    try:
        flags = tool_flags()
    finally:
        events.init_command_line_parser.remove_listener(add_undocumented)
    assert "--etcd-undocumented-knob" in flags
    assert missing_from_reference(flags, rendered) == ["--etcd-undocumented-knob"]
    assert "--etcd-undocumented-knob" not in tool_flags(), "the listener is gone again"


def test_a_page_that_lost_its_placeholder_stops_the_build(hook):
    with pytest.raises(hook.ReferenceGenerationError, match="placeholder"):
        hook.render("# Options\n\nno tables here\n")


def test_every_command_of_the_docs_is_runnable_here_or_marked(tmp_path):
    from docs_commands import MARKERS, all_commands, quick_variant

    commands = all_commands()
    assert len(commands) > 20, "the pages' commands must be found"
    for command in commands:
        quick_variant(command, tmp_path)  # raises for a command the quick variants do not know
    assert {command.marker for command in commands} >= set(MARKERS.values())


def test_each_command_left_to_a_test_is_on_a_page_and_its_test_exists(tmp_path):
    from docs_commands import REPO, RUN_BY_TESTS, all_commands, quick_variant

    commands = all_commands()
    for pattern, reason in RUN_BY_TESTS.items():
        left = [command for command in commands if re.search(pattern, command.text)]
        assert left, f"no page shows a command that {pattern!r} finds"
        assert all(quick_variant(command, tmp_path).skip == reason for command in left), pattern
        assert (REPO / reason.split()[0]).is_file(), reason


def test_the_readme_links_to_pages_that_exist():
    readme = (REPO / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", readme)
    assert len(links) >= 10, links
    assert [link for link in links if not (REPO / link).is_file()] == []
    assert ".venv/bin/python -m pytest -q" in readme, "CI reads the README's test command"
