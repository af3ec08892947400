"""The house rules a reshaped package must keep: no import circles, no ``sys.path`` edits, pure parts stay pure."""

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("etcd_users", "shapes", "analysis", "benchmarks")


def project_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    return modules


def imports_of(path: Path, module: str, known: set[str]) -> set[str]:
    """Every project module ``path`` imports, at its top or inside a function (``from a import b`` counts a.b when b
    is a module, else a); relative imports resolved."""
    found = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        found.update(name for name in names if name in known and name != module)
    return found


def test_no_import_circle_among_the_project_s_modules_counting_imports_inside_functions():
    modules = project_modules()
    graph = {name: imports_of(path, name, set(modules)) for name, path in modules.items()}
    assert graph["etcd_users.core.plugin"], "the graph must see imports (a parser that finds none proves nothing)"
    circles = []
    state: dict[str, int] = {}

    def visit(name: str, stack: list[str]) -> None:
        state[name] = 1
        stack.append(name)
        for imported in sorted(graph[name]):
            if state.get(imported) == 1:
                circles.append(" -> ".join([*stack[stack.index(imported) :], imported]))
            elif imported not in state:
                visit(imported, stack)
        stack.pop()
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [])
    assert circles == []


def test_no_module_outside_the_tests_edits_sys_path():
    edits = [
        f"{path.relative_to(REPO)}:{number}"
        for path in [*project_modules().values(), REPO / "locustfile.py"]
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if "sys.path" in line
    ]
    assert edits == []


def test_settings_files_and_hdr_load_neither_locust_nor_gevent_nor_grpc():
    # the suite runner, the analysis and the tests validate options and read files without gevent's patching
    code = (
        "import sys, etcd_users.settings, etcd_users.files, etcd_users.hdr, etcd_users.suite.cli; "
        "import etcd_users.analysis, etcd_users.core.features; "
        "print(sorted(m for m in ('locust', 'gevent', 'grpc') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", result.stderr


def module_level_dicts(tree: ast.Module) -> set[str]:
    """The names a module binds at its top to a dict (a literal, a comprehension, ``dict()``, or annotated ``dict``)."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            annotated = ast.unparse(node.annotation).split("[")[0].rsplit(".", 1)[-1].lower().endswith("dict")
            if annotated or is_dict(node.value):
                names.add(node.target.id)
        elif isinstance(node, ast.Assign) and is_dict(node.value):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
    return names


def is_dict(value: ast.expr | None) -> bool:
    if isinstance(value, (ast.Dict, ast.DictComp)):
        return True
    return isinstance(value, ast.Call) and ast.unparse(value.func).rsplit(".", 1)[-1].lower().endswith("dict")


def keys_by_id(tree: ast.Module, names: set[str]) -> list[int]:
    """Lines where one of ``names`` is read or written with a key made by ``id(...)``."""

    def made_by_id(node: ast.AST) -> bool:
        return any(
            isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "id"
            for call in ast.walk(node)
        )

    def named(node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id in names

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and named(node.value) and made_by_id(node.slice):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and named(node.func.value):
            if node.args and made_by_id(node.args[0]):
                lines.append(node.lineno)
        elif isinstance(node, ast.Compare) and any(named(other) for other in node.comparators):
            if made_by_id(node.left):
                lines.append(node.lineno)
    return lines


def test_no_module_keeps_a_run_s_state_in_a_module_level_dict_keyed_by_id():
    # a process's state for a run lives on its context (etcd_users.core.run_context), not in globals keyed by
    # id(environment)
    sample = ast.parse("_kept: dict[int, object] = {}\ndef get(environment):\n    return _kept.get(id(environment))\n")
    assert keys_by_id(sample, module_level_dicts(sample)) == [3], "the scan must find the pattern it forbids"
    found = []
    for name, path in project_modules().items():
        if name.split(".")[0] != "etcd_users":
            continue
        tree = ast.parse(path.read_text())
        found += [f"{path.relative_to(REPO)}:{line}" for line in keys_by_id(tree, module_level_dicts(tree))]
    assert found == []


def feature_hooks_classes() -> set[str]:
    """Every class of the package whose bases name ``FeatureHooks``, as ``module:Class``."""
    found = set()
    for name, path in project_modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            bases = [ast.unparse(base) for base in node.bases] if isinstance(node, ast.ClassDef) else []
            if any(base.endswith("FeatureHooks") for base in bases):
                found.add(f"{name}:{node.name}")
    return found


def test_a_feature_is_one_package_named_in_features():
    # FEATURES names packages; each says in its FEATURE what it brings: the option groups, the --etcd-* options and
    # the hooks all come from there
    from etcd_users import settings
    from etcd_users.core import features
    from etcd_users.features.shapes.options import ShapeSettings

    assert all(isinstance(name, str) and "." not in name for name in features.FEATURES)
    assert sorted(features.FEATURES) == sorted(
        path.name for path in (REPO / "etcd_users" / "features").iterdir() if (path / "__init__.py").is_file()
    )
    loaded = features.features()
    assert not hasattr(settings, "GROUPS") and not hasattr(settings, "OPTIONS")
    groups = [feature.options for feature in loaded if feature.options is not None]
    assert list(features.option_groups()) == groups
    etcd_groups = [group for group in groups if group is not ShapeSettings]
    assert features.OPTIONS == tuple(declared for group in etcd_groups for declared in group.options())
    named = {f"{feature.package}.{feature.hooks}" for feature in loaded if feature.hooks}
    # the gates' hooks compose the watch over the workers
    assert feature_hooks_classes() == named | {"etcd_users.features.gates.worker_watch:WorkerWatch"}
    assert all((REPO / "docs" / feature.docs).is_file() for feature in loaded), "each feature's page, beside it"


def test_the_hooks_order_is_declared_not_carried_by_the_features_place_in_the_list():
    import random

    from etcd_users.core import features

    def names(loaded) -> list[str]:
        return [feature.package.rpartition(".")[2] for feature in loaded]

    def honoured(order: list[str]) -> bool:
        middle = [name for name in order if name not in features.FIRST and name not in features.LAST]
        pairs = all(order.index(earlier) < order.index(later) for earlier, later, _ in features.BEFORE)
        return order == [*features.FIRST, *middle, *features.LAST] and pairs

    loaded = features.features()
    # the list's order, where no rule says otherwise: FIRST, then the others as listed, then LAST
    order = names(features.hook_order(loaded))
    assert honoured(order) and [name for name in order if name not in (*features.FIRST, *features.LAST)] == [
        name for name in features.FEATURES if name not in (*features.FIRST, *features.LAST)
    ]
    assert not honoured(list(reversed(features.FEATURES))), "the check must see a broken order"
    shuffled = random.Random(50)
    for _ in range(20):
        order = names(features.hook_order(tuple(shuffled.sample(loaded, len(loaded)))))
        assert sorted(order) == sorted(features.FEATURES) and honoured(order), order
    known = set(features.FEATURES)
    declared = {*features.FIRST, *features.LAST, *(name for pair in features.BEFORE for name in pair[:2])}
    assert declared <= known, declared - known


def test_before_rules_in_a_circle_are_refused_with_the_features_named(monkeypatch):
    from etcd_users.core import features

    monkeypatch.setattr(features, "BEFORE", (("tail", "summary", ""), ("summary", "tail", "")))
    try:
        features.hook_order(features.features())
    except ValueError as error:
        assert "go in a circle" in str(error) and "'tail'" in str(error) and "'summary'" in str(error)
    else:
        raise AssertionError("a circle of BEFORE rules was not refused")


# the package's top: the entry points and the file contract sit there by their nature; its own modules stay few
TOP_MODULES_MAX = 10
TOP_MODULES_ASIDE = ("__init__", "__main__", "cli", "locustfile", "files")


def top_modules_over_the_limit(package: Path) -> list[str]:
    """The modules at ``package``'s top but the entry points and the file contract, when more than TOP_MODULES_MAX."""
    own = sorted(path.stem for path in package.glob("*.py") if path.stem not in TOP_MODULES_ASIDE)
    return own if len(own) > TOP_MODULES_MAX else []


def test_the_package_s_top_keeps_at_most_ten_modules_of_its_own(tmp_path):
    # the workload model is one package, compaction and the round trip live in shared layers, the option reference in
    # __main__: what the top keeps is the users, the session and a few shared leaves
    for name in [*TOP_MODULES_ASIDE, *(f"part_{number}" for number in range(TOP_MODULES_MAX))]:
        (tmp_path / f"{name}.py").write_text("")
    assert top_modules_over_the_limit(tmp_path) == [], "the entry points and the file contract are not counted"
    (tmp_path / "one_more.py").write_text("")
    assert len(top_modules_over_the_limit(tmp_path)) == TOP_MODULES_MAX + 1, "the check must see one too many"
    assert top_modules_over_the_limit(REPO / "etcd_users") == []


def test_a_module_that_moved_keeps_its_logger_s_name():
    # users filter and search the log by these names: a module moved to a package keeps the name its lines carry
    from etcd_users.transport import compaction

    assert compaction.logger.name == "etcd_users.compaction"


TOP = {"etcd_users", "etcd_users.users", "etcd_users.locustfile", "etcd_users.cli", "etcd_users.__main__"}
# what features share lives below them: what a run is judged by, the members as found, the state the features meet
# in on the run's context, the audit's records the clients write, the cluster under load, the base user and its client
SHARED = (
    "etcd_users.judging",
    "etcd_users.members",
    "etcd_users.run_state",
    "etcd_users.audit_trail",
    "etcd_users.target",
    "etcd_users.user_base",
)


def layer(module: str) -> int:
    """core 0, shared infrastructure 1, features 2, the top (the users, the entry points, the suite, the analysis) 3."""
    if module.startswith("etcd_users.core"):
        return 0
    if module in SHARED or module.startswith(tuple(f"{package}." for package in SHARED)):
        return 1
    if module.startswith("etcd_users.features"):
        return 2
    if module in TOP or module.startswith(("etcd_users.suite", "etcd_users.analysis")):
        return 3
    return 1


def imports_up(modules: dict[str, Path]) -> list[str]:
    known = set(modules)
    found = []
    for name, path in sorted(modules.items()):
        if not name.startswith("etcd_users"):
            continue
        for imported in sorted(imports_of(path, name, known)):
            if not imported.startswith("etcd_users"):
                continue
            if (layer(name) == 0 and layer(imported) != 0) or layer(imported) > max(layer(name), 1):
                found.append(f"{name} -> {imported}")
    return found


def test_core_imports_no_feature_and_nothing_imports_up_the_layers(tmp_path):
    # core (plugin, run context, role, exit code, option declaration) knows no feature; shared infrastructure
    # (settings, transport, latency, local, the file contract, the shared packages of SHARED) knows none either; a
    # feature knows core and the shared parts, never the top
    sample = tmp_path / "sample.py"
    sample.write_text("from etcd_users.features.audit import run\n")
    made_up = {
        "etcd_users.core.sample": sample,
        "etcd_users.judging.sample": sample,
        "etcd_users.features.audit.run": sample,
    }
    assert imports_up(made_up) == [
        "etcd_users.core.sample -> etcd_users.features.audit.run",
        "etcd_users.judging.sample -> etcd_users.features.audit.run",
    ], "the check must see them"
    modules = project_modules()
    assert all(f"{package}.__init__" not in modules and package in modules for package in SHARED)
    assert {layer(name) for name in modules if name.startswith(SHARED)} == {1}
    assert imports_up(modules) == []


def features_imported(modules: dict[str, Path]) -> list[str]:
    """Imports of a feature's module from another feature's package: features meet through the run's slots and
    hooks (``etcd_users.core.run_context``), and share what lives below them, never each other's modules."""
    known = set(modules)
    found = []
    for name, path in sorted(modules.items()):
        parts = name.split(".")
        if parts[:2] != ["etcd_users", "features"] or len(parts) < 3:
            continue
        for imported in sorted(imports_of(path, name, known)):
            other = imported.split(".")
            if other[:2] == ["etcd_users", "features"] and len(other) >= 3 and other[2] != parts[2]:
                found.append(f"{name} -> {imported}")
    return found


def test_no_feature_imports_another_feature(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from etcd_users.features.audit import run\nfrom etcd_users.judging import sla\n")
    made_up = {
        "etcd_users.features.gates.sample": sample,
        "etcd_users.features.audit.sample": sample,
        "etcd_users.features.audit.run": sample,
        "etcd_users.judging.sla": sample,
    }
    assert features_imported(made_up) == ["etcd_users.features.gates.sample -> etcd_users.features.audit.run"], (
        "the check must see one, and only one"
    )
    assert features_imported(project_modules()) == []


def internals_imported(modules: dict[str, Path], public: dict[str, tuple[str, ...]]) -> list[str]:
    """Imports of a feature's module from outside the feature that its FEATURE does not list as public."""
    known = set(modules)
    found = []
    for name, path in sorted(modules.items()):
        for imported in sorted(imports_of(path, name, known)):
            parts = imported.split(".")
            package = ".".join(parts[:3])
            if parts[:2] != ["etcd_users", "features"] or len(parts) < 4 or f"{name}.".startswith(f"{package}."):
                continue
            if parts[3] not in public.get(parts[2], ()):
                found.append(f"{name} -> {imported}")
    return found


def test_a_feature_s_internals_are_its_own(tmp_path):
    # no feature imports another (above); the top (the users, the analysis, the load shapes' aliases, the benchmarks)
    # imports a feature's public modules only (its users, the engine's loop, a shape)
    from etcd_users.core.features import features

    sample = tmp_path / "sample.py"
    sample.write_text("from etcd_users.features.audit import run\n")
    made_up = {"etcd_users.analysis.sample": sample, "etcd_users.features.audit.run": sample}
    assert internals_imported(made_up, {"audit": ("record",)}) == [
        "etcd_users.analysis.sample -> etcd_users.features.audit.run"
    ], "the check must see one"
    public = {feature.package.rpartition(".")[2]: feature.public for feature in features()}
    declared = [f"{name}.{module}" for name, modules in public.items() for module in modules]
    assert [name for name in declared if f"etcd_users.features.{name}" not in project_modules()] == []
    assert internals_imported(project_modules(), public) == []


def test_importing_the_users_makes_no_feature_s_hooks():
    # hooks are made when Locust builds its parser: a feature's module that imports the users (a workload and its
    # hooks in one file) is not imported while etcd_users.users is
    code = (
        "import sys, etcd_users.users; "
        "print(sorted(m for m in sys.modules if m.startswith('etcd_users.features.') and m.endswith('.hooks')))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", result.stderr
