"""Benchmark suites: a grid of settings × repeats, each cell a separate headless Locust run, one command per table.

    python -m etcd_users.suite run suites/seed000.yaml [--out DIR] [--quick] [--dry-run]
    python -m etcd_users.suite check suites/*.yaml

A suite file (YAML, schema in ``suites/README.md``) names fixed ``--etcd-*`` options and axes of values; every
combination of the axes, repeated ``repeats`` times, is one Locust process against the given endpoints or a fresh
local etcd started for that run alone. ``DIR/suite.json`` records the plan and each run's status for the analysis.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first: the options module imports Locust)

import argparse
import ast
import csv
import difflib
import hashlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import yaml

from etcd_users.cluster import ClusterError, LocalCluster, find_etcd_binary
from etcd_users.options import OPTIONS, Option, SettingsError, settings_from_options

PROG = "python -m etcd_users.suite"
REPO = Path(__file__).resolve().parent.parent
DEFAULT_LOCUSTFILE = REPO / "locustfile.py"
SCHEMA_VERSION = 1
SUITE_JSON = "suite.json"

TOP_KEYS = (
    "name",
    "description",
    "repeats",
    "duration",
    "users",
    "spawn_rate",
    "user_class",
    "members",
    "endpoints",
    "etcd_args",
    "locustfile",
    "fixed",
    "axes",
    "quick",
)
QUICK_KEYS = ("repeats", "duration", "users", "spawn_rate", "fixed", "axes")
SETTING_AXES = ("user_class", "users", "members")
# options that have a top-level key of their own
RESERVED_OPTIONS = {
    "endpoints": "set the top-level key endpoints",
    "local-members": "set the top-level key members (or a members axis)",
}
OPTIONS_BY_NAME: dict[str, Option] = {option.flag.removeprefix("--etcd-"): option for option in OPTIONS}
# Start-up of a run besides its duration (etcd, Locust, the endpoint check), until runs have been timed.
OVERHEAD_GUESS_SECONDS = {1: 4.0, 3: 6.0}
STOP_GRACE_SECONDS = 15.0
STDERR_TAIL_LINES = 12
POLL_SECONDS = 0.1


class SuiteError(ValueError):
    """A bad suite file or output directory, told in one line that names the key."""


# -- the suite file ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Axis:
    """One axis: a name, or several joined by ``+`` whose values move together (a linked axis)."""

    parts: tuple[str, ...]  # canonical names: option names without --etcd-, or user_class / users / members
    values: tuple[tuple, ...]  # one tuple per step, aligned with parts

    @property
    def name(self) -> str:
        return "+".join(self.parts)


@dataclass(frozen=True)
class Suite:
    path: Path
    name: str
    description: str
    quick: bool
    repeats: int
    duration: int
    users: int | None
    spawn_rate: float | None
    user_class: tuple[str, ...] | None
    members: int
    endpoints: str
    etcd_args: tuple[str, ...]
    locustfile: Path
    fixed: dict[str, object]
    axes: tuple[Axis, ...]

    @property
    def axis_names(self) -> list[str]:
        """Every axis part, in order: the columns of the table."""
        return [part for axis in self.axes for part in axis.parts]


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
        if isinstance(value, bool) or not isinstance(value, int) or value not in (1, 3):
            raise self.fail(key, f"{value!r} is not 1 or 3 (the local etcd's size)")
        return int(value)

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


def canonical_name(name: str) -> str:
    """``key_size``, ``key-size`` and ``etcd-key-size`` all name ``--etcd-key-size``."""
    return name.replace("_", "-").removeprefix("etcd-")


def _option_name(checker: _Checker, key: str, name: object, allow_settings: bool) -> str:
    """The canonical name of an option (or, on axes, of user_class / users / members)."""
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
            from etcd_users.endpoints import parse_endpoints

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
        endpoints=endpoints,
        etcd_args=etcd_args,
        locustfile=locustfile,
        fixed=fixed,
        axes=axes,
    )
    _check_combinations(checker, suite)
    return suite


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
        raise checker.fail(key, "an axis name must be an option name (or user_class, users, members)")
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
    if part == "user_class":
        return checker.user_classes(key, value, known_classes, locustfile)
    return checker.option_value(key, OPTIONS_BY_NAME[part], value)


# -- the plan ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Combination:
    id: str  # directory name under the output directory
    values: dict  # axis part -> value (a user_class list joined with '+')
    users: int
    spawn_rate: float
    user_class: tuple[str, ...]
    members: int
    options: dict  # option name -> value: fixed and axes (what the command line passes)

    @property
    def label(self) -> str:
        return " ".join(f"{name}={_text(value)}" for name, value in self.values.items()) or "(single combination)"


@dataclass(frozen=True)
class Run:
    combination: Combination
    repeat: int  # 1-based
    index: int  # 1-based position in the plan

    @property
    def relative_prefix(self) -> str:
        return f"{self.combination.id}/rep{self.repeat}"


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, tuple | list):
        return "+".join(map(_text, value))
    return str(value)


def _id_part(name: str, value: object) -> str:
    label = "class" if name == "user_class" else name
    return f"{label}={re.sub(r'[^A-Za-z0-9.+-]', '-', _text(value))}"


def combinations(suite: Suite) -> list[Combination]:
    """Every combination of the axes, the first axis varying slowest."""
    result = []
    for steps in itertools.product(*(axis.values for axis in suite.axes)):
        values: dict[str, object] = {}
        for axis, step in zip(suite.axes, steps, strict=True):
            values.update(zip(axis.parts, step, strict=True))
        options = dict(suite.fixed)
        options.update({name: value for name, value in values.items() if name not in SETTING_AXES})
        users = values.get("users", suite.users)
        result.append(
            Combination(
                id="_".join(_id_part(name, value) for name, value in values.items()) or "all",
                values={name: _text(value) if name == "user_class" else value for name, value in values.items()},
                users=users,
                spawn_rate=suite.spawn_rate if suite.spawn_rate is not None else float(users),
                user_class=values.get("user_class", suite.user_class),
                members=values.get("members", suite.members),
                options=options,
            )
        )
    return result


def plan(suite: Suite) -> list[Run]:
    """All runs, repeat by repeat: a drift of the machine spreads over every combination, and a suite stopped
    half-way has whole repeats of the table."""
    combos = combinations(suite)
    runs = [Run(combo, repeat, 0) for repeat in range(1, suite.repeats + 1) for combo in combos]
    return [Run(run.combination, run.repeat, index) for index, run in enumerate(runs, start=1)]


def _check_combinations(checker: _Checker, suite: Suite) -> None:
    """Every combination passes the options' own checks now, not as a failed run an hour in."""
    seen: dict[str, str] = {}
    for combo in combinations(suite):
        if combo.id in seen:
            raise checker.fail("axes", f"{combo.label!r} and {seen[combo.id]!r} give the same directory name")
        seen[combo.id] = combo.label
        namespace = argparse.Namespace(**{option.dest: option.default for option in OPTIONS})
        for name, value in combo.options.items():
            setattr(namespace, OPTIONS_BY_NAME[name].dest, value)
        namespace.etcd_endpoints = suite.endpoints
        try:
            settings_from_options(namespace)
        except SettingsError as error:
            where = f"combination {combo.label}: " if suite.axes else ""
            key = _key_of_flag(str(error), suite, combo)
            raise checker.fail(key, f"{where}{error}") from None


def _key_of_flag(message: str, suite: Suite, combo: Combination) -> str:
    """The suite key behind the first --etcd-* flag an option error names."""
    match = re.match(r"--etcd-([a-z-]+)", message)
    name = match.group(1) if match else ""
    if name in combo.values:
        return f"axes.{next(axis.name for axis in suite.axes if name in axis.parts)}"
    if name in suite.fixed:
        return f"fixed.{name}"
    return "endpoints" if name == "endpoints" else "fixed"


# -- running ----------------------------------------------------------------------------------------------


def locust_command(suite: Suite, run: Run, prefix: Path, endpoints: str, mask: bool = False) -> list[str]:
    """The Locust command line of one run; with ``mask``, secrets shown as ***."""
    combo = run.combination
    command = [
        sys.executable, "-m", "locust",
        "-f", str(suite.locustfile),
        "--headless", "--only-summary",
        "-u", str(combo.users),
        "-r", _text(combo.spawn_rate),
        "-t", f"{suite.duration}s",
        "--csv", str(prefix),
        *combo.user_class,
        "--etcd-endpoints", endpoints,
    ]  # fmt: skip
    options = dict(combo.options)
    if suite.endpoints and "cleanup" not in options:
        # a shared cluster keeps what a run wrote: the next run's check of the prefix would refuse it
        options["cleanup"] = True
    for name, value in options.items():
        option = OPTIONS_BY_NAME[name]
        if isinstance(option.default, bool):
            if value:
                command.append(option.flag)
            continue
        command += [option.flag, "***" if mask and option.secret and value else _option_text(value)]
    return command


def _option_text(value: object) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def fingerprint(suite: Suite, run: Run) -> str:
    """What makes a run's data: a done run whose fingerprint differs is stale and runs again."""
    combo = run.combination
    target = (
        {"endpoints": suite.endpoints} if suite.endpoints else {"members": combo.members, "etcd_args": suite.etcd_args}
    )
    content = {
        "locustfile": str(suite.locustfile),
        "duration": suite.duration,
        "users": combo.users,
        "spawn_rate": combo.spawn_rate,
        "user_class": combo.user_class,
        "options": {name: _text(value) for name, value in sorted(combo.options.items())},
        **target,
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=list).encode()).hexdigest()


@dataclass
class RunRecord:
    """A run's entry in suite.json."""

    status: str = "pending"  # pending | done | failed | interrupted
    started: str | None = None
    seconds: float | None = None
    exit_code: int | None = None
    requests: int | None = None
    failures: int | None = None
    summary: str | None = None
    error: str | None = None
    command: list[str] | None = None
    earlier: bool = False  # done by an earlier invocation, skipped by this one
    stale: bool = False  # done earlier with other settings: runs again


@dataclass
class Outcome:
    ok: bool
    summary: str
    requests: int | None = None
    failures: int | None = None
    error: str | None = None


def _paths(prefix: Path) -> dict[str, Path]:
    base = prefix.parent
    return {
        "stats": base / f"{prefix.name}_stats.csv",
        "exceptions": base / f"{prefix.name}_exceptions.csv",
        "done": base / f"{prefix.name}.done",
        "stdout": base / f"{prefix.name}.stdout",
        "stderr": base / f"{prefix.name}.stderr",
    }


def _read_done(prefix: Path) -> dict | None:
    paths = _paths(prefix)
    if not paths["stats"].is_file():
        return None
    try:
        return json.loads(paths["done"].read_text())
    except (OSError, ValueError):
        return None


def _totals(stats_path: Path) -> tuple[int, int] | None:
    """Requests and failures of the Aggregated row of a Locust _stats.csv."""
    try:
        with open(stats_path, newline="") as stats_file:
            for row in csv.DictReader(stats_file):
                if row.get("Name") == "Aggregated":
                    return int(row["Request Count"]), int(row["Failure Count"])
    except (OSError, KeyError, ValueError):
        return None
    return None


def _exceptions(path: Path) -> list[str]:
    try:
        with open(path, newline="") as exceptions_file:
            return [row.get("Message", "") for row in csv.DictReader(exceptions_file)]
    except OSError:
        return []


def _tail(path: Path, lines: int = STDERR_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def judge(prefix: Path, exit_code: int, duration: int) -> Outcome:
    """Locust exits 1 when requests failed: that is data. Anything else non-zero, or no data, is a failed run."""
    paths = _paths(prefix)
    totals = _totals(paths["stats"])
    exceptions = _exceptions(paths["exceptions"])
    requests, failures = totals if totals else (None, None)
    data_only = exit_code == 1 and failures and not exceptions
    if exit_code != 0 and not data_only:
        detail = f"; exceptions in the workload: {exceptions[0]}" if exceptions else ""
        return Outcome(
            False, f"locust exited with code {exit_code}{detail}", requests, failures, _tail(paths["stderr"])
        )
    if totals is None:
        return Outcome(False, f"no readable {paths['stats'].name}", error=_tail(paths["stderr"]))
    if requests == 0:
        return Outcome(
            False,
            f"no requests in {duration}s (a read workload writes its key space first: lengthen duration or lower "
            "key-space-size)",
            0,
            0,
            _tail(paths["stderr"]),
        )
    rate = f", {failures / requests:.1%} failed" if failures else ""
    return Outcome(True, f"{requests:,} requests, {failures:,} failures{rate}", requests, failures)


class Interrupted(Exception):
    """Ctrl-C or SIGTERM: stop the current run and the local etcd, keep finished runs."""


class _Signals:
    """Turns SIGINT and SIGTERM into a flag the run loop polls (an exception raised from a handler would surface in
    gevent's hub with a traceback)."""

    def __init__(self) -> None:
        self.count = 0
        self.signum: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> "_Signals":
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: object) -> None:
        self.count += 1
        self.signum = self.signum or signum

    def check(self) -> None:
        if self.count:
            raise Interrupted


@dataclass
class Runner:
    suite: Suite
    out: Path
    signals: _Signals
    echo: Callable[[str], None] = field(default=lambda line: print(line, flush=True))
    records: dict[tuple[str, int], RunRecord] = field(default_factory=dict)
    created: str = field(default_factory=lambda: _now())  # replaced by an earlier suite.json's
    overheads: list[float] = field(default_factory=list)

    def execute(self) -> int:
        runs = plan(self.suite)
        todo = [run for run in runs if not self.is_done(run)]
        needs_local = not self.suite.endpoints and todo
        if needs_local:
            find_etcd_binary()  # no etcd at all fails every run: say so once, now
        self._write_json("running")
        self.echo(
            f"suite {self.suite.name}{' (quick)' if self.suite.quick else ''}: "
            f"{_grid(self.suite, len(runs))}; {len(runs) - len(todo)} done earlier; "
            f"about {_clock(self.estimate(todo))} left; output in {self.out}"
        )
        if self.suite.endpoints and (self.suite.members != 1 or self.suite.etcd_args):
            self.echo("note: endpoints given: members and etcd_args are not used")
        started = time.monotonic()
        failed = []
        try:
            for position, run in enumerate(runs):
                self.signals.check()
                record = self.records[(run.combination.id, run.repeat)]
                head = f"[{run.index}/{len(runs)}] {run.combination.label} rep {run.repeat}/{self.suite.repeats}"
                if record.status == "done":
                    self.echo(f"{head}: done earlier, skipped")
                    continue
                remaining = [later for later in runs[position:] if not self.is_done(later)]
                again = " (its earlier run had other settings: running again)" if record.stale else ""
                self.echo(f"{head}{again} … ETA {_clock(self.estimate(remaining))}")
                self._execute(run, record)
                self._write_json("running")
                if record.status == "done":
                    self.echo(f"    ok in {record.seconds:.1f}s: {record.summary}")
                else:
                    failed.append(run)
                    self.echo(f"    FAILED after {record.seconds:.1f}s: {record.error}")
        except Interrupted:
            self._write_json("interrupted")
            done = sum(record.status == "done" for record in self.records.values())
            self.echo(f"interrupted: {done}/{len(runs)} runs done and kept in {self.out}; run again to resume")
            return 130 if self.signals.signum != signal.SIGTERM else 143
        self._write_json("finished")
        done = sum(record.status == "done" for record in self.records.values())
        self.echo(
            f"suite {self.suite.name}: {done}/{len(runs)} runs done, {len(failed)} failed, in "
            f"{_clock(time.monotonic() - started)}; {self.out / SUITE_JSON}"
        )
        for run in failed:
            self.echo(f"  failed: {run.relative_prefix} (log: {_paths(self.out / run.relative_prefix)['stderr']})")
        return 1 if failed else 0

    def prepare(self) -> None:
        """Read what earlier invocations finished, from each run's done marker."""
        try:
            self.created = json.loads((self.out / SUITE_JSON).read_text())["created"]
        except (OSError, ValueError, KeyError, TypeError):
            pass
        for run in plan(self.suite):
            record = RunRecord()
            marker = _read_done(self.out / run.relative_prefix)
            if marker is not None and marker.get("fingerprint") == fingerprint(self.suite, run):
                record = RunRecord(
                    status="done",
                    started=marker.get("started"),
                    seconds=marker.get("seconds"),
                    exit_code=marker.get("exit_code"),
                    requests=marker.get("requests"),
                    failures=marker.get("failures"),
                    summary=marker.get("summary"),
                    command=marker.get("command"),
                    earlier=True,
                )
            elif marker is not None:
                record.stale = True
            self.records[(run.combination.id, run.repeat)] = record

    def is_done(self, run: Run) -> bool:
        return self.records[(run.combination.id, run.repeat)].status == "done"

    def estimate(self, runs: Sequence[Run]) -> float:
        def overhead(members: int) -> float:
            if self.overheads:
                return sum(self.overheads) / len(self.overheads)
            return OVERHEAD_GUESS_SECONDS.get(1 if self.suite.endpoints else members, 5.0)

        return sum(self.suite.duration + overhead(run.combination.members) for run in runs)

    def _execute(self, run: Run, record: RunRecord) -> None:
        prefix = self.out / run.relative_prefix
        paths = _paths(prefix)
        prefix.parent.mkdir(parents=True, exist_ok=True)
        paths["done"].unlink(missing_ok=True)  # a stale marker must not outlive the data it vouched for
        started = time.monotonic()
        record.status, record.started, record.error = "interrupted", _now(), None
        cluster = None
        try:
            endpoints = self.suite.endpoints
            if not endpoints:
                cluster = LocalCluster(
                    run.combination.members, extra_args=self.suite.etcd_args, name=f"suite-{os.getpid()}"
                )
                try:
                    cluster.start(timeout=30)
                except ClusterError as error:
                    record.status, record.error = "failed", f"local etcd did not start: {str(error).splitlines()[0]}"
                    return
                endpoints = ",".join(cluster.endpoints)
                self.signals.check()
            command = locust_command(self.suite, run, prefix, endpoints)
            record.command = locust_command(self.suite, run, prefix, endpoints, mask=True)
            exit_code = self._locust(command, paths)
            record.exit_code = exit_code
            outcome = judge(prefix, exit_code, self.suite.duration)
            record.requests, record.failures = outcome.requests, outcome.failures
            if not outcome.ok:
                tail = f"\n{_indent(outcome.error)}" if outcome.error else ""
                record.status, record.error = "failed", f"{outcome.summary}{tail}"
                return
            record.status, record.summary = "done", outcome.summary
        finally:
            if cluster is not None:
                cluster.stop()
            record.seconds = round(time.monotonic() - started, 2)
        self.overheads.append(max(0.0, record.seconds - self.suite.duration))
        marker = {
            "fingerprint": fingerprint(self.suite, run),
            "started": record.started,
            "seconds": record.seconds,
            "exit_code": record.exit_code,
            "requests": record.requests,
            "failures": record.failures,
            "summary": record.summary,
            "command": record.command,
        }
        paths["done"].write_text(json.dumps(marker, indent=1) + "\n")

    def _locust(self, command: list[str], paths: dict[str, Path]) -> int:
        with open(paths["stdout"], "w") as stdout, open(paths["stderr"], "w") as stderr:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                env=_locust_environment(),
                # its own session: Ctrl-C reaches the runner alone, which stops Locust first, then etcd
                start_new_session=True,
            )
        try:
            while process.poll() is None:
                if self.signals.count:
                    _stop(process, self.signals)
                    raise Interrupted
                time.sleep(POLL_SECONDS)
        finally:
            if process.poll() is None:
                _kill_group(process)
        return process.returncode

    def _write_json(self, state: str) -> None:
        suite = self.suite
        combos = combinations(suite)
        document = {
            "schema": SCHEMA_VERSION,
            "name": suite.name,
            "description": suite.description,
            "file": str(suite.path.resolve()),
            "quick": suite.quick,
            "state": state,
            "created": self.created,
            "updated": _now(),
            "duration": suite.duration,
            "repeats": suite.repeats,
            "endpoints": suite.endpoints,
            "etcd_args": list(suite.etcd_args),
            "locustfile": str(suite.locustfile),
            "fixed": _public_options(suite.fixed),
            "axes": [{"name": axis.name, "parts": list(axis.parts)} for axis in suite.axes],
            "axis_names": suite.axis_names,
            "combinations": [],
        }
        for combo in combos:
            document["combinations"].append(
                {
                    "id": combo.id,
                    "label": combo.label,
                    "values": combo.values,
                    "users": combo.users,
                    "spawn_rate": combo.spawn_rate,
                    "user_class": list(combo.user_class),
                    "members": None if suite.endpoints else combo.members,
                    "options": _effective_options(combo.options),
                    "runs": [
                        {
                            "repeat": repeat,
                            "prefix": f"{combo.id}/rep{repeat}",
                            **_record_json(self.records[(combo.id, repeat)]),
                        }
                        for repeat in range(1, suite.repeats + 1)
                    ],
                }
            )
        self.out.mkdir(parents=True, exist_ok=True)
        temporary = self.out / f".{SUITE_JSON}.tmp"
        temporary.write_text(json.dumps(document, indent=1) + "\n")
        temporary.replace(self.out / SUITE_JSON)


def _record_json(record: RunRecord) -> dict:
    return {
        "status": record.status,
        "earlier": record.earlier,
        "started": record.started,
        "seconds": record.seconds,
        "exit_code": record.exit_code,
        "requests": record.requests,
        "failures": record.failures,
        "summary": record.summary,
        "error": record.error,
        "command": record.command,
    }


def _public_options(options: dict) -> dict:
    return {name: "***" if OPTIONS_BY_NAME[name].secret and value else value for name, value in options.items()}


def _effective_options(options: dict) -> dict:
    """Every option's value in the run (defaults included), secrets masked, endpoints left out."""
    merged = {
        name: option.default
        for name, option in OPTIONS_BY_NAME.items()
        if name not in RESERVED_OPTIONS and not isinstance(option.default, bytes)
    }
    merged.update(options)
    return _public_options(merged)


def _locust_environment() -> dict[str, str]:
    # The suite file alone decides a run: ETCD_* variables would set options behind its back. Secrets may stay in
    # the environment rather than in a suite file.
    secret_variables = {option.env_var for option in OPTIONS if option.secret}
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("ETCD_") or key in secret_variables
    }
    environment["PYTHONUNBUFFERED"] = "1"
    return environment


def _stop(process: subprocess.Popen, signals: _Signals) -> None:
    """SIGTERM (Locust writes its CSVs and quits), SIGKILL after a grace period or a second Ctrl-C."""
    presses = signals.count
    try:
        process.terminate()
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while process.poll() is None and time.monotonic() < deadline and signals.count == presses:
        time.sleep(POLL_SECONDS)
    _kill_group(process)


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def _indent(text: str) -> str:
    return "\n".join(f"      | {line}" for line in text.splitlines())


def _grid(suite: Suite, runs: int) -> str:
    combos = runs // suite.repeats
    return (
        f"{_plural(combos, 'combination')} × {_plural(suite.repeats, 'repeat')} = {_plural(runs, 'run')} "
        f"of {suite.duration}s"
    )


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _check_out_dir(out: Path, suite: Suite) -> None:
    existing = out / SUITE_JSON
    if not existing.is_file():
        return
    try:
        name = json.loads(existing.read_text()).get("name")
    except (OSError, ValueError, AttributeError):
        raise SuiteError(f"{existing}: unreadable; delete it or choose another --out") from None
    if name != suite.name:
        raise SuiteError(f"--out: {out} holds suite {name!r}, not {suite.name!r}; choose another --out")


def dry_run(suite: Suite, out: Path) -> None:
    runner = Runner(suite, out, _Signals())
    runner.prepare()
    runs = plan(suite)
    todo = [run for run in runs if not runner.is_done(run)]
    combos = combinations(suite)
    size = "1- or 3-member (members axis)" if "members" in suite.axis_names else f"{suite.members}-member"
    target = suite.endpoints or f"a fresh {size} local etcd per run"
    if suite.etcd_args and not suite.endpoints:
        target += f" (etcd {' '.join(suite.etcd_args)})"
    print(
        f"suite {suite.name}{' (quick)' if suite.quick else ''} from {suite.path}: {_grid(suite, len(runs))} "
        f"against {target}; "
        f"{len(runs) - len(todo)} done earlier; about {_clock(runner.estimate(todo))}; output in {out}"
    )
    for combo in combos:
        done = sum(runner.is_done(run) for run in runs if run.combination.id == combo.id)
        first = next(run for run in runs if run.combination.id == combo.id)
        endpoints = suite.endpoints or f"<local {combo.members}-member etcd>"
        command = locust_command(suite, first, out / combo.id / "rep{k}", endpoints, mask=True)
        print(f"  {combo.id}: {combo.label}  ({done}/{suite.repeats} done)")
        print(f"    {' '.join(_quote(part) for part in command)}")


def _quote(part: str) -> str:
    return part if re.fullmatch(r"[A-Za-z0-9_./:=,+{}<>*@-]+", part) else "'" + part.replace("'", "'\\''") + "'"


def default_out(suite: Suite) -> Path:
    return Path("out") / "suites" / f"{suite.name}{'-quick' if suite.quick else ''}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description="Run a benchmark suite: a grid of settings × repeats.")
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="run every combination of a suite file (resumable)")
    run_parser.add_argument("suite", type=Path, metavar="SUITE", help="suite file (YAML), e.g. suites/seed000.yaml")
    run_parser.add_argument("--out", type=Path, metavar="DIR", help="output directory (default out/suites/NAME)")
    run_parser.add_argument("--quick", action="store_true", help="apply the suite's quick: section (a short run)")
    run_parser.add_argument("--dry-run", action="store_true", help="print the plan and the commands, run nothing")
    check_parser = commands.add_parser("check", help="validate suite files (with and without their quick section)")
    check_parser.add_argument("suites", type=Path, nargs="+", metavar="SUITE")
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            return _check(args.suites)
        suite = load_suite(args.suite, quick=args.quick)
        out = args.out or default_out(suite)
        _check_out_dir(out, suite)
        if args.dry_run:
            dry_run(suite, out)
            return 0
        with _Signals() as signals:
            runner = Runner(suite, out, signals)
            runner.prepare()
            return runner.execute()
    except (SuiteError, ClusterError) as error:
        print(f"error: {str(error).splitlines()[0]}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into head: not an error
        sys.stdout = open(os.devnull, "w")  # Python flushes stdout at exit
        return 0
    except OSError as error:  # an output directory that cannot be written, a full disk
        print(f"error: {error}; check --out", file=sys.stderr)
        return 2


def _check(paths: Sequence[Path]) -> int:
    status = 0
    for path in paths:
        try:
            suite = load_suite(path)
            quick = ""
            if "quick" in read_document(path):
                quick_suite = load_suite(path, quick=True)
                quick = f"; quick: {_grid(quick_suite, len(plan(quick_suite)))}"
            print(f"{path}: ok ({_grid(suite, len(plan(suite)))}{quick})")
        except SuiteError as error:
            print(f"error: {error}", file=sys.stderr)
            status = 2
    return status


if __name__ == "__main__":
    sys.exit(main())
