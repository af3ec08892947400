"""Reading a suite file into a `Suite`: strict YAML, every key and value checked, and every combination of the
axes passed through the options' own checks, so that a bad file fails before anything runs, in one line that names
the key (`SuiteError`)."""

import ast
import difflib
import re
from collections.abc import Sequence
from pathlib import Path

import yaml

from etcd_users.core.arguments import Option
from etcd_users.local import ClusterError, choose_etcd_binary
from etcd_users.settings import SettingsError, parse_endpoints
from etcd_users.settings.connection import LOCAL_MEMBERS
from etcd_users.suite.plan import Combination, combination_settings, combinations, label_text
from etcd_users.suite.schema import (
    COMPARE_KEYS,
    DEFAULT_LOCUSTFILE,
    LOCAL_CLUSTER_OPTIONS,
    OPTIONS_BY_NAME,
    QUICK_KEYS,
    RENAMED,
    RESERVED_OPTIONS,
    SETTING_AXES,
    TOP_KEYS,
    Axis,
    Compare,
    Suite,
    SuiteError,
    canonical_name,
)


class _StrictLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys; a suite file with both is a mistake to report."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_document(path: Path) -> dict:
    try:
        text = path.read_text()
    except OSError as error:
        raise SuiteError(f"{path}: cannot read the suite file ({error.strerror})") from None
    try:
        document = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise SuiteError(f"{path}: {where}not valid YAML ({problem})") from None
    if not isinstance(document, dict):
        raise SuiteError(f"{path}: expected a mapping of keys (name, duration, users, user_class, axes, …)")
    return document


class _Checker:
    """Validates values, raising SuiteError as ``FILE: KEY: problem``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, problem: str) -> SuiteError:
        return SuiteError(f"{self.path}: {key}: {problem}")

    def integer(self, key: str, value: object, minimum: int = 1) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected a whole number, got {value!r}")
        if value < minimum:
            raise self.fail(key, f"{value} must be at least {minimum}")
        return value

    def number(self, key: str, value: object, positive: bool = True) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(key, f"expected a number, got {value!r}")
        if value < 0 or (positive and value == 0):
            raise self.fail(key, f"{value!r} must be {'greater than zero' if positive else 'zero or more'}")
        return float(value)

    def string(self, key: str, value: object) -> str:
        if not isinstance(value, str):
            raise self.fail(key, f"expected a string, got {value!r}")
        return value

    def strings(self, key: str, value: object) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.fail(key, f"expected a list of strings, got {value!r}")
        return tuple(value)

    def mapping(self, key: str, value: object) -> dict:
        if not isinstance(value, dict):
            raise self.fail(key, f"expected a mapping, got {value!r}")
        return value

    def members(self, key: str, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value not in LOCAL_MEMBERS:
            sizes = f"from {LOCAL_MEMBERS[0]} to {LOCAL_MEMBERS[-1]}"
            raise self.fail(key, f"{value!r} is not {sizes} (the local etcd's size)")
        return int(value)

    def processes(self, key: str, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.fail(key, f"{value!r} is not a whole number of processes, 1 or more (Locust's --processes)")
        return value

    def user_classes(self, key: str, value: object, known: set[str], locustfile: Path) -> tuple[str, ...]:
        """One class name, or a list of them run side by side in one Locust process."""
        names = value if isinstance(value, list) else [value]
        if not names or not all(isinstance(name, str) and name for name in names):
            raise self.fail(key, f"expected a User class name or a list of them, got {value!r}")
        for name in names:
            if name not in known:
                raise self.fail(
                    key,
                    f"{name!r} is not a User class of {_display(locustfile)}{_did_you_mean(name, known)}; "
                    f"known: {', '.join(sorted(known))}",
                )
        if len(set(names)) != len(names):
            raise self.fail(key, f"{value!r} names a class twice")
        return tuple(names)

    def option_value(self, key: str, option: Option, value: object) -> object:
        """A value of the option's type (that of its default) and among its choices."""
        default = option.default
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise self.fail(key, f"expected true or false, got {value!r}")
        elif isinstance(default, int):
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.fail(key, f"expected a whole number, got {value!r}")
        elif isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise self.fail(key, f"expected a number, got {value!r}")
            value = float(value)
        elif isinstance(default, str):
            if not isinstance(value, str):
                raise self.fail(key, f"expected a string, got {value!r} (quote it in YAML)")
        if option.choices and value not in option.choices:
            raise self.fail(key, f"{value!r} is not one of: {', '.join(map(str, option.choices))}")
        return value


def _did_you_mean(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _option_name(checker: _Checker, key: str, name: object, allow_settings: bool) -> str:
    """The canonical name of an option (or, on axes, of user_class / users / members / processes)."""
    if not isinstance(name, str):
        raise checker.fail(key, f"{name!r} is not an option name")
    if allow_settings and name.replace("-", "_") in SETTING_AXES:
        return name.replace("-", "_")
    canonical = canonical_name(name)
    if canonical in RESERVED_OPTIONS:
        raise checker.fail(key, f"not allowed here; {RESERVED_OPTIONS[canonical]}")
    if canonical in OPTIONS_BY_NAME:
        return canonical
    if not allow_settings and name.replace("-", "_") in SETTING_AXES:
        raise checker.fail(key, f"not an --etcd-* option; set {name.replace('-', '_')} at the top level or as an axis")
    known = [option for option in OPTIONS_BY_NAME if option not in RESERVED_OPTIONS]
    if allow_settings:
        known += list(SETTING_AXES)
    raise checker.fail(key, f"unknown option{_did_you_mean(canonical, known)}; known: {', '.join(known)}")


def locustfile_classes(checker: _Checker, path: Path) -> set[str]:
    """Class names a locustfile defines or imports at module level, read without running it."""
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except (OSError, SyntaxError) as error:
        raise checker.fail("locustfile", f"cannot read {_display(path)} ({error})") from None
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names.update((alias.asname or alias.name).rsplit(".", 1)[-1] for alias in node.names)
    return {name for name in names if name[:1].isupper() and name != "EtcdUser"}


def renamed(path: Path) -> Path | None:
    """The new name of a ready suite asked for by its earlier name (a file that exists is read as it is)."""
    if path.name not in RENAMED or path.exists():
        return None
    return path.with_name(RENAMED[path.name])


def load_suite(path: Path | str, quick: bool = False) -> Suite:
    """Read and validate a suite file; with ``quick``, apply its ``quick:`` overrides. Raises SuiteError."""
    path = Path(path)
    document = read_document(path)
    checker = _Checker(path)
    for key in document:
        if key == "total":
            raise checker.fail(
                "total", "not supported: Locust runs are bounded by time, not by a request count; set duration"
            )
        if key not in TOP_KEYS:
            raise checker.fail(
                str(key), f"unknown key{_did_you_mean(str(key), TOP_KEYS)}; known: {', '.join(TOP_KEYS)}"
            )
    quick_section = document.get("quick")
    if quick_section is not None:
        checker.mapping("quick", quick_section)
        for key in quick_section:
            if key not in QUICK_KEYS:
                raise checker.fail(f"quick.{key}", f"not allowed in quick; allowed: {', '.join(QUICK_KEYS)}")
    # The quick section is checked even when not used, so that --quick never fails late.
    full = _build_suite(checker, document, None)
    quick_suite = _build_suite(checker, document, quick_section) if quick_section is not None else None
    if not quick:
        return full
    if quick_suite is None:
        raise checker.fail("quick", "this suite has no quick section; add one or run without --quick")
    return quick_suite


def _build_suite(checker: _Checker, document: dict, quick: dict | None) -> Suite:
    def pick(key: str) -> tuple[str, object]:
        """The value and its key as written: from the quick section when it overrides the key."""
        if quick is not None and key in quick:
            return f"quick.{key}", quick[key]
        return key, document.get(key)

    path = checker.path
    name = checker.string("name", document.get("name", path.stem))
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise checker.fail("name", f"{name!r}: use letters, digits, '.', '_' and '-' (it names the output directory)")
    description = checker.string("description", document.get("description", ""))
    key, value = pick("repeats")
    repeats = checker.integer(key, 1 if value is None else value)
    key, value = pick("duration")
    if value is None:
        raise checker.fail("duration", "missing: give the seconds of each run")
    duration = checker.integer(key, value)
    endpoints = document.get("endpoints", "")
    if isinstance(endpoints, list):
        endpoints = ",".join(checker.strings("endpoints", endpoints))
    endpoints = checker.string("endpoints", endpoints).strip()
    if endpoints:
        try:
            parse_endpoints(endpoints)
        except SettingsError as error:
            raise checker.fail("endpoints", str(error).removeprefix("--etcd-endpoints: ")) from None
    members = checker.members("members", document.get("members", 1))
    etcd_args = checker.strings("etcd_args", document.get("etcd_args", []))
    locustfile = DEFAULT_LOCUSTFILE
    if "locustfile" in document:
        # relative to the suite file, so that a suite and its locustfile travel together
        locustfile = (path.parent / checker.string("locustfile", document["locustfile"])).resolve()
        if not locustfile.is_file():
            raise checker.fail("locustfile", f"{_display(locustfile)} does not exist")
    known_classes = locustfile_classes(checker, locustfile)

    fixed: dict[str, object] = {}
    written: dict[str, str] = {}
    sections = [("fixed", document.get("fixed") or {})]
    if quick is not None and "fixed" in quick:
        sections.append(("quick.fixed", quick["fixed"] or {}))
    for section, mapping in sections:
        for raw_name, raw_value in checker.mapping(section, mapping).items():
            key = f"{section}.{raw_name}"
            option_name = _option_name(checker, key, raw_name, allow_settings=False)
            if option_name in written and written[option_name].split(".")[0] == section.split(".")[0]:
                raise checker.fail(key, f"same option as {written[option_name]}")
            written[option_name] = key
            fixed[option_name] = checker.option_value(key, OPTIONS_BY_NAME[option_name], raw_value)

    axes = _build_axes(checker, document, quick, known_classes, locustfile)
    axis_parts = [part for axis in axes for part in axis.parts]
    for part in axis_parts:
        if part in fixed:
            raise checker.fail(f"axes.{part}", f"also set in {written[part]}; keep one")
    if endpoints and "members" in axis_parts:
        raise checker.fail("axes.members", "cannot vary with endpoints given; remove the axis or the endpoints")

    key, value = pick("users")
    users = None
    if "users" in axis_parts:
        if value is not None:
            raise checker.fail(key, "also an axis; keep one")
    elif value is None:
        raise checker.fail("users", "missing: give the number of users (or a users axis)")
    else:
        users = checker.integer(key, value)
    key, value = pick("spawn_rate")
    spawn_rate = None if value is None else checker.number(key, value)
    user_class = None
    if "user_class" in axis_parts:
        if "user_class" in document:
            raise checker.fail("user_class", "also an axis; keep one")
    elif "user_class" not in document:
        raise checker.fail("user_class", "missing: give the User class to run (or a user_class axis)")
    else:
        user_class = checker.user_classes("user_class", document["user_class"], known_classes, locustfile)
    if "members" in axis_parts and "members" in document:
        raise checker.fail("members", "also an axis; keep one")
    key, value = pick("processes")
    processes = 1
    if "processes" in axis_parts:
        if value is not None:
            raise checker.fail(key, "also an axis; keep one")
    elif value is not None:
        processes = checker.processes(key, value)

    suite = Suite(
        path=path,
        name=name,
        description=description,
        quick=quick is not None,
        repeats=repeats,
        duration=duration,
        users=users,
        spawn_rate=spawn_rate,
        user_class=user_class,
        members=members,
        processes=processes,
        endpoints=endpoints,
        etcd_args=etcd_args,
        locustfile=locustfile,
        fixed=fixed,
        axes=axes,
        compare=_build_compare(checker, document.get("compare"), axes),
    )
    _check_combinations(checker, suite)
    return suite


def _build_compare(checker: _Checker, raw: object, axes: tuple[Axis, ...]) -> Compare | None:
    """``compare:``, an axis of the suite (its quick section's values with --quick) with one name and two values."""
    if raw is None:
        return None
    checker.mapping("compare", raw)
    for key in raw:
        if key not in COMPARE_KEYS:
            raise checker.fail(f"compare.{key}", f"unknown key; known: {', '.join(COMPARE_KEYS)}")
    if "axis" not in raw:
        raise checker.fail("compare", "missing axis: name the axis whose two values are compared")
    name = checker.string("compare.axis", raw["axis"])
    parts = tuple(_option_name(checker, "compare.axis", part.strip(), allow_settings=True) for part in name.split("+"))
    axis = next((axis for axis in axes if axis.parts == parts), None)
    if axis is None:
        known = ", ".join(axis.name for axis in axes) or "none"
        raise checker.fail("compare.axis", f"{name!r} is not an axis of the suite; its axes: {known}")
    if len(parts) > 1:
        raise checker.fail("compare.axis", f"{axis.name} moves several settings together; compare an axis of one name")
    if len(axis.values) != 2:
        raise checker.fail(
            "compare.axis",
            f"{axis.name} has {len(axis.values)} value{'s' * (len(axis.values) != 1)}; compare takes an axis of two, "
            "the baseline first",
        )
    changed = raw.get("changed", [])
    changed = (changed,) if isinstance(changed, str) else checker.strings("compare.changed", changed)
    baseline, candidate = (label_text(value[0]) for value in axis.values)
    return Compare(axis=axis.name, baseline=baseline, candidate=candidate, changed=tuple(changed))


def _build_axes(
    checker: _Checker, document: dict, quick: dict | None, known_classes: set[str], locustfile: Path
) -> tuple[Axis, ...]:
    raw_axes = document.get("axes")
    if raw_axes is None:
        if quick is not None and "axes" in quick:
            raise checker.fail("quick.axes", "the suite has no axes to override")
        return ()
    checker.mapping("axes", raw_axes)
    if not raw_axes:
        raise checker.fail("axes", "empty; give at least one axis, or remove the key for a single combination")
    axes: dict[tuple[str, ...], Axis] = {}
    for raw_name, raw_values in raw_axes.items():
        axis = _build_axis(checker, f"axes.{raw_name}", raw_name, raw_values, known_classes, locustfile)
        seen = [part for existing in axes for part in existing]
        for part in axis.parts:
            if part in seen:
                raise checker.fail(f"axes.{raw_name}", f"{part} is already on another axis")
        axes[axis.parts] = axis
    if quick is not None and "axes" in quick:
        for raw_name, raw_values in checker.mapping("quick.axes", quick["axes"] or {}).items():
            axis = _build_axis(checker, f"quick.axes.{raw_name}", raw_name, raw_values, known_classes, locustfile)
            if axis.parts not in axes:
                raise checker.fail(
                    f"quick.axes.{raw_name}", f"not an axis of the suite; axes: {', '.join('+'.join(p) for p in axes)}"
                )
            axes[axis.parts] = axis
    return tuple(axes.values())


def _build_axis(
    checker: _Checker, key: str, raw_name: object, raw_values: object, known_classes: set[str], locustfile: Path
) -> Axis:
    if not isinstance(raw_name, str) or not raw_name:
        raise checker.fail(key, "an axis name must be an option name (or user_class, users, members, processes)")
    parts = tuple(_option_name(checker, key, part.strip(), allow_settings=True) for part in raw_name.split("+"))
    if len(set(parts)) != len(parts):
        raise checker.fail(key, "names the same option twice")
    for part in parts:
        if part in OPTIONS_BY_NAME and OPTIONS_BY_NAME[part].secret:
            raise checker.fail(key, f"{part} is secret and cannot be an axis (axis values name directories); fix it")
    if not isinstance(raw_values, list):
        raise checker.fail(key, f"expected a list of values, got {raw_values!r}")
    if not raw_values:
        raise checker.fail(key, "empty list; give at least one value")
    values = []
    for index, raw in enumerate(raw_values):
        step = raw if len(parts) > 1 else [raw]
        if len(parts) > 1 and (not isinstance(raw, list) or len(raw) != len(parts)):
            raise checker.fail(f"{key}[{index}]", f"expected a list of {len(parts)} values ({', '.join(parts)})")
        values.append(
            tuple(
                _axis_value(checker, f"{key}[{index}]", part, item, known_classes, locustfile)
                for part, item in zip(parts, step, strict=True)
            )
        )
    if len(set(values)) != len(values):
        raise checker.fail(key, "a value is listed twice")
    return Axis(parts=parts, values=tuple(values))


def _axis_value(
    checker: _Checker, key: str, part: str, value: object, known_classes: set[str], locustfile: Path
) -> object:
    if part == "users":
        return checker.integer(key, value)
    if part == "members":
        return checker.members(key, value)
    if part == "processes":
        return checker.processes(key, value)
    if part == "user_class":
        return checker.user_classes(key, value, known_classes, locustfile)
    return checker.option_value(key, OPTIONS_BY_NAME[part], value)


def _check_combinations(checker: _Checker, suite: Suite) -> None:
    """Every combination passes the options' own checks now, not as a failed run an hour in."""
    seen: dict[str, str] = {}
    for combo in combinations(suite):
        if combo.id in seen:
            raise checker.fail("axes", f"{combo.label!r} and {seen[combo.id]!r} give the same directory name")
        seen[combo.id] = combo.label
        if combo.processes > combo.users:
            key = "axes" if {"users", "processes"} & set(suite.axis_names) else "processes"
            where = f"combination {combo.label}: " if suite.axes else ""
            raise checker.fail(key, f"{where}{combo.processes} processes for {combo.users} users leave a process idle")
        where = f"combination {combo.label}: " if suite.axes else ""
        try:
            settings = combination_settings(suite, combo)
        except SettingsError as error:
            key = _key_of_flag(str(error), suite, combo)
            raise checker.fail(key, f"{where}{error}") from None
        local = [name for name in LOCAL_CLUSTER_OPTIONS if combo.options.get(name)]
        if local and suite.endpoints:
            raise checker.fail(
                _key_of_flag(f"--etcd-{local[0]}", suite, combo),
                "sets the local etcd the suite starts for each run, and endpoints gives a cluster of your own; leave "
                "one of them out",
            )
        if settings.local_binary.strip():
            try:
                choose_etcd_binary(settings.local_binary, "--etcd-local-binary")
            except ClusterError as error:
                raise checker.fail(_key_of_flag("--etcd-local-binary", suite, combo), f"{where}{error}") from None


def _key_of_flag(message: str, suite: Suite, combo: Combination) -> str:
    """The suite key behind the first --etcd-* flag an option error names."""
    match = re.match(r"--etcd-([a-z-]+)", message)
    name = match.group(1) if match else ""
    if name in combo.values:
        return f"axes.{next(axis.name for axis in suite.axes if name in axis.parts)}"
    if name in suite.fixed:
        return f"fixed.{name}"
    return "endpoints" if name == "endpoints" else "fixed"
