"""The option reference of the documentation lists every option the code declares.

The reference page is generated at build time by ``docs/hooks/reference.py``; these tests render the page as the
build does and compare it with the ``--etcd-*`` and ``--shape-*`` flags of Locust's own parser once the tool has
registered its options, so an option added to the code but missing from the generated reference fails here.
"""

import locust  # noqa: F401  (gevent patching before anything else loads: Locust's parser is built below)
from locust import events
from locust.argument_parser import get_parser

import importlib.util
import inspect
import re
from pathlib import Path

import pytest

import etcd_users.features.shapes.options  # noqa: F401  (registers the --shape-* options)
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
    return set(re.findall(r"^\| \[`(--[a-z0-9-]+)`\]\(#[a-z0-9-]+\)\{#[a-z0-9-]+\} \|", page, flags=re.MULTILINE))


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


def test_the_step_time_s_row_names_every_shape_that_holds_a_level_for_it(rendered):
    # plan.py holds StepSpikeShape's steps, ConcurrencyLadderShape's rungs and each capacity probe that long
    row = next(line for line in rendered.splitlines() if line.startswith("| [`--shape-step-time`]"))
    assert all(shape in row for shape in ("StepSpikeShape", "ConcurrencyLadderShape", "CapacitySearchShape")), row


def test_each_option_has_its_environment_variable_and_the_placeholder_is_gone(hook, rendered):
    assert hook.PLACEHOLDER not in rendered
    for flag in tool_flags():
        variable = "LOCUST_" + flag.removeprefix("--").replace("-", "_").upper()
        anchor = flag.removeprefix("--")
        assert f"| [`{flag}`](#{anchor}){{#{anchor}}} | `{variable}` |" in rendered, flag


def test_each_option_has_an_anchor_of_its_own_and_its_default_as_a_user_types_it(rendered):
    rows = dict(re.findall(r"^\| \[`(--[a-z0-9-]+)`\].*? \| `LOCUST_\w+` \| (.*?) \| ", rendered, flags=re.MULTILINE))
    assert rows["--etcd-endpoints"] == "none" and rows["--etcd-cleanup"] == "off"
    assert (
        rows["--etcd-consistency"] == "`l`" and rows["--etcd-timeout"] == "`5`" and rows["--etcd-key-size"] == "`256`"
    )
    assert not [default for default in rows.values() if "'" in default or default in ("`False`", "`True`", "``")]
    headings = {
        re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") for title in re.findall(r"^## (.+)$", rendered, re.M)
    }
    anchors = re.findall(r"\{#([a-z0-9-]+)\}", rendered)
    assert len(anchors) == len(set(anchors)) == len(rows) and not headings & set(anchors)


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


def test_a_quick_run_binds_a_free_master_port_and_its_few_users_send_a_request_a_second(tmp_path):
    from docs_commands import Command, quick_variant

    text = (
        ".venv/bin/locust -f locustfile.py --headless --processes 4 -u 20000 -r 20000 -t 15s "
        "--etcd-user-rate 0.05 EtcdPutUser"
    )
    (run,) = quick_variant(Command("docs/x.md", 1, text), tmp_path).runs
    value = {option: run.argv[run.argv.index(option) + 1] for option in ("--processes", "-u", "--etcd-user-rate")}
    assert value == {"--processes": "2", "-u": "16", "--etcd-user-rate": "1"}
    bound = run.argv[run.argv.index("--master-bind-port") + 1]
    assert bound != "5557" and run.argv[run.argv.index("--master-port") + 1] == bound


def test_a_suite_that_compares_may_end_in_a_regression_found_and_one_that_does_not_may_not(tmp_path):
    from docs_commands import Command, quick_variant

    def ok_codes(suite: str) -> set[int]:
        text = f".venv/bin/python -m etcd_users.suite run {suite} --out out/x"
        (run,) = quick_variant(Command("docs/x.md", 1, text), tmp_path).runs
        return set(run.ok_codes)

    # the before/after example compares a real change: a machine quiet enough finds it worse (exit 3)
    assert ok_codes("examples/before-after.yaml") == {0, 3}
    assert ok_codes("suites/single-vs-three-members.yaml") == {0}


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


def test_ci_runs_the_readmes_test_command():
    readme = (REPO / "README.md").read_text()
    command = re.search(r"the test command itself is:\n\n```bash\n(.+)\n```", readme)
    assert command, "README.md says its test command after 'the test command itself is:'"
    ci_lines = (REPO / ".ci" / "run").read_text().splitlines()
    assert ci_lines[-1] == command[1] == ".venv/bin/python -m pytest -q -n 3"


# -- the Python API reference (docs/reference/api.md, rendered by mkdocstrings from the docstrings) --

API_PAGE = REPO / "docs" / "reference" / "api.md"
# public methods a page of the API leaves out on purpose: Locust calls them, a locustfile never does
NOT_FOR_LOCUSTFILES = {"etcd_users.features.shapes.base.PlannedShape": {"tick", "judge_remaining_levels"}}


def api_directives(page: str) -> dict[str, list[str] | None]:
    """Each ``::: path`` of the page and the members its ``options: members:`` list names (None: no list)."""
    directives: dict[str, list[str] | None] = {}
    current = None
    for line in page.splitlines():
        if line.startswith("::: "):
            current = line.removeprefix("::: ").strip()
            directives[current] = None
        elif current is not None and re.match(r"^ {8}- \w+$", line):
            directives[current] = [*(directives[current] or []), line.strip().removeprefix("- ")]
        elif current is not None and line.strip() and not line.startswith("    "):
            current = None
    return directives


def public_methods(cls: type) -> set[str]:
    """The methods and properties a class defines in its body, not starting with an underscore (an attribute set to
    a function made elsewhere, such as Locust's ``wait_time = constant(0)``, is not one)."""
    defined = f"{cls.__qualname__}."
    methods = set()
    for name, value in vars(cls).items():
        function = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
        if not name.startswith("_") and inspect.isfunction(function) and function.__qualname__.startswith(defined):
            methods.add(name)
    return methods


def resolve(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_every_public_method_of_the_client_and_the_bases_is_in_the_api_reference():
    directives = api_directives(API_PAGE.read_text())
    for path in (
        "etcd_users.user_base.client.EtcdClient",
        "etcd_users.user_base.user.EtcdUser",
        "etcd_users.features.shapes.base.PlannedShape",
    ):
        assert path in directives, f"{API_PAGE.name} has no '::: {path}'"
        listed = directives[path]
        if listed is None:
            continue  # every public member is rendered
        cls = resolve(path)
        missing = public_methods(cls) - set(listed) - NOT_FOR_LOCUSTFILES.get(path, set())
        assert missing == set(), f"{path}: add {sorted(missing)} to the members of {API_PAGE.name}"
        assert [name for name in listed if not hasattr(cls, name)] == [], path


def test_the_api_reference_would_miss_a_method_added_to_the_client():
    from etcd_users.user_base.client import EtcdClient

    listed = api_directives(API_PAGE.read_text())["etcd_users.user_base.client.EtcdClient"]
    assert {"ranges", "paged_list", "txn_mixed", "lease_revoke", "keys"} <= set(listed)

    class Grown(EtcdClient):
        def compact(self, revision: int) -> None:
            """A method the page does not list."""

    assert public_methods(Grown) - set(listed) == {"compact"}


def test_the_methods_of_the_api_reference_have_docstrings():
    """mkdocstrings leaves a member without a docstring out of the page, listed or not."""
    for path, listed in api_directives(API_PAGE.read_text()).items():
        if listed is None:
            continue
        cls = resolve(path)
        methods = public_methods(cls) & set(listed)
        undocumented = [name for name in sorted(methods) if not (vars(cls)[name].__doc__ or "").strip()]
        assert undocumented == [], path


# -- the code layout page and the package's exports --

LAYOUT_PAGE = REPO / "docs" / "reference" / "layout.md"
PACKAGE = REPO / "etcd_users"


def layout_entries(page: str) -> dict[str, str]:
    """The layout block's entries under ``etcd_users/``: the name at the start of an indented line (``files.py``,
    ``latency/``, ``users.py, client.py``) with the text of that line and its continuation lines."""
    block = page.split("```text\n", 1)[1].split("```", 1)[0]
    entries: dict[str, str] = {}
    current = None
    for line in block.splitlines():
        match = re.match(r"^  (\S[^ ]*(?: \S+\.py)*)\s{2,}(.*)$", line)
        if match:
            current = match.group(1)
            entries[current] = match.group(2)
        elif current is not None and line.startswith(" " * 10):
            entries[current] += " " + line.strip()
        else:
            current = None
    return entries


def test_the_layout_page_names_every_module_and_folder_of_the_package():
    entries = layout_entries(LAYOUT_PAGE.read_text())
    named = {name for entry in entries for name in entry.split(", ")}
    modules = {path.name for path in PACKAGE.glob("*.py") if path.name != "__init__.py"}
    folders = {f"{path.name}/" for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
    assert sorted((modules | folders) - named) == [], f"name them in {LAYOUT_PAGE.name}"
    for folder in sorted(folders):
        text = entries[folder]
        inside = {path.stem for path in (PACKAGE / folder).glob("*.py") if path.name != "__init__.py"}
        missing = sorted(stem for stem in inside if not re.search(rf"(?<![\w.]){re.escape(stem)}(?!\w)", text))
        assert missing == [], f"{folder} in {LAYOUT_PAGE.name} does not name {missing}"


def test_the_package_exports_every_class_of_the_locustfile():
    import ast

    tree = ast.parse((PACKAGE / "locustfile.py").read_text())
    users_imports = (
        node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module == "etcd_users.users"
    )
    imported = {alias.name for node in users_imports for alias in node.names}
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    exports = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_EXPORTS"
    )
    users = {name for name, module in exports.items() if module == "etcd_users.users"}
    assert users == imported | {"EtcdUser"}
    assert {"EtcdClient", "KeyOutsidePrefixError"} <= set(exports)


# -- the files a run writes (etcd_users/files.py): all in the table of docs/analysis.md and in "Files written:" --


def test_the_analysis_page_and_the_end_of_a_run_list_every_file_a_run_writes():
    from etcd_users.features.latency.end_of_run import FILE_ORDER
    from etcd_users.files import SUFFIXES

    page = (REPO / "docs" / "analysis.md").read_text()
    table = set(re.findall(r"`PREFIX(_[a-z_.]+)`", "\n".join(re.findall(r"^\| `PREFIX.*?\|", page, re.MULTILINE))))
    assert sorted(set(SUFFIXES.values()) - table) == []
    assert sorted(set(SUFFIXES) - set(FILE_ORDER)) == [], "the terminal's list of the files written"


def test_the_pages_commands_run_the_project_s_tools_from_the_venv_as_printed():
    """``locust``, ``locust-etcd`` and ``python`` of the pages are ``.venv/bin/…``: a bare name runs only with the venv
    active (or finds another Python's); ``python3 -m venv`` that makes the venv is the one exception."""
    from docs_commands import all_commands

    bare = re.compile(r"(?:^|&&\s*|;\s*|\bdo\s+)(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(locust-etcd|locust|python3?|pip)\s")
    found = [
        f"{command.where}: {command.text[:80]}"
        for command in all_commands()
        if any(
            m.group(1) != "python3" or "-m venv" not in command.text[m.end() :][:10]
            for m in bare.finditer(command.text)
        )
    ]
    assert found == []


NAMED_FLAG = re.compile(r"--(?:etcd|shape)-[a-z0-9-]*[a-z0-9]")


def unknown_flags(pages: dict[str, str], known: set[str]) -> dict[str, list[str]]:
    """The --etcd-*/--shape-* names each page mentions that no option has: a page that sends a reader to an option
    that does not exist."""
    found = {page: sorted(set(NAMED_FLAG.findall(text)) - known) for page, text in pages.items()}
    return {page: names for page, names in found.items() if names}


def test_every_option_the_readme_and_the_docs_name_exists():
    pages = {str(path.relative_to(REPO)): path.read_text() for path in [REPO / "README.md", *REPO.glob("docs/**/*.md")]}
    assert len(pages) > 20 and sum(len(NAMED_FLAG.findall(text)) for text in pages.values()) > 500
    # the contributing page's worked example declares an option of its own (tests/e2e/test_new_feature.py runs it)
    assert unknown_flags(pages, tool_flags()) == {"docs/contributing.md": ["--etcd-toy-ratio"]}


def test_the_option_check_finds_a_made_up_name():
    page = "Compact with `--etcd-compaction 5s`, or `--etcd-compact-interval 5s`; `--shape-ladder 1,2`."
    assert unknown_flags({"page.md": page}, tool_flags()) == {"page.md": ["--etcd-compaction"]}


def logger_names() -> set[str]:
    """The names the package's log lines carry: a module's own, or the one it gives its logger."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        if "getLogger(__name__)" in text:
            names.add(".".join(path.relative_to(REPO).with_suffix("").parts))
        names.update(re.findall(r'getLogger\("([\w.]+)"\)', text))
    names.update(re.findall(r'^RUN_LOGGER = "([\w.]+)"', (PACKAGE / "core" / "feature_hooks.py").read_text(), re.M))
    return names


def test_every_log_line_a_page_shows_carries_a_name_the_code_logs_under():
    # a reader filters the logs by the names the pages show (INFO/etcd_users.shapes.base: ...)
    pages = [REPO / "README.md", *REPO.glob("docs/**/*.md")]
    shown = {
        name for page in pages for name in re.findall(r"(?:INFO|WARNING|ERROR)/(etcd_users[\w.]*)", page.read_text())
    }
    assert {"etcd_users.shapes.base", "etcd_users.monitoring.space"} <= shown
    assert sorted(shown - logger_names()) == []
