"""The shell commands the documentation shows, and the quick variant of each that a test runs.

Commands are the lines of the ```bash blocks of README.md and of the pages of mkdocs.yml's nav, in that order, so a
command that reads a run's files comes after the run that makes them. A block right after the line ``<!-- needs a real
cluster -->`` (its commands need a cluster of one's own), ``<!-- a measurement of minutes -->`` (the run behind the
figures shown under it, too long for CI) or ``<!-- fetches an etcd from outside -->`` (a download of another etcd) is
not run. Every other command is turned into a short run against the local
etcd the tool starts itself: the rules of ``quick_variant`` shorten durations and plans, cap users and processes, and
put every output under one directory.
"""

from __future__ import annotations

import glob
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from support import free_port

from etcd_users.suite.loader import load_suite

REPO = Path(__file__).resolve().parents[1]
MARKER = "<!-- needs a real cluster -->"
LONG_MARKER = "<!-- a measurement of minutes -->"  # the figures shown under it come from that run; too long for CI
FETCH_MARKER = "<!-- fetches an etcd from outside -->"  # a package or a release download: CI has its etcds already
MARKERS = {
    MARKER: "marked as needing a real cluster",
    LONG_MARKER: "marked as a measurement of minutes",
    FETCH_MARKER: "marked as fetching an etcd from outside",
}
SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}

# executables of the environment the tests run in (.venv/bin of a clone, or wherever pytest's python lives)
TOOLS = {"locust", "locust-etcd", "python", "python3"}
# what the environment already is: the set-up steps of a command chain are not run again
SET_UP = (("python3", "-m", "venv"), ("pip", "install"))
# commands that are not run here, with the reason given in the skip
NOT_RUN = {
    "bash .ci/run": "CI's entry point: the run that runs these tests",
    "python -m pytest": "the test command: the run that runs these tests",
    "mkdocs build": ".ci/run builds the documentation (tests/unit/test_docs.py checks its reference)",
    "mkdocs serve": "serves until stopped; `mkdocs build` is the same site",
    "build_go_benchmark.sh": "builds etcd's Go tool from Debian's packages and etcd's git history",
}
_YCSB = "tests/e2e/test_ycsb.py runs this suite's workloads and checks its table"
_COMPARE = "tests/e2e/test_compare.py compares 1 KiB and 512 KiB values, with and without --noise, checks the verdicts"
_PEER_RTT = "tests/e2e/test_peer_rtt_suite.py runs this suite's quick table and checks the round trips it adds"
# commands (a pattern of their text) that a test runs in its own form and checks more closely: not run twice
RUN_BY_TESTS = {
    r"-m etcd_users\.suite run suites/peer-rtt\.yaml\b": _PEER_RTT,
    r"-m analysis suite out/peer-rtt\b": _PEER_RTT,
    r"-m etcd_users\.suite run suites/ycsb\.yaml\b": _YCSB,
    r"-m analysis suite out/ycsb\b": _YCSB,
    r"--csv out/before\b": _COMPARE,
    r"--csv out/after\b": _COMPARE,
    r"-m analysis compare out/before out/after\b": _COMPARE,
}
# modules that serve until stopped: started, read until this line, then stopped
SERVES_UNTIL = {"etcd_users.local": "LOCUST_ETCD_ENDPOINTS=", "etcd_users.cluster": "LOCUST_ETCD_ENDPOINTS="}

RUN_TIME = "3s"
MAX_USERS = 16
MIN_USER_RATE = 1.0  # requests per second of each rate-driven user of a quick run: a few in its seconds
MAX_PROCESSES = 2
TIME_SCALE = "0.01"  # the 25-minute step-plus-spike plan in 15 s, cut to 5 s by its lower top step below


@dataclass(frozen=True)
class Command:
    page: str  # path relative to the repository
    line: int  # line of the command's first line in the page
    text: str  # the command, continuation lines joined
    marker: str = ""  # why its block is not run (MARKERS), empty for a block that is

    @property
    def marked(self) -> bool:
        return bool(self.marker)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass
class Run:
    """One process to run for a command: its arguments, extra environment, the exit codes that count as success."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    ok_codes: frozenset[int] = frozenset({0})
    serves_until: str = ""  # a line that tells the process is up; it is then stopped
    tolerated: str = ""  # a failure label that makes Locust exit 1 in a healthy run (Kubernetes' write conflicts)


@dataclass
class Plan:
    runs: list[Run] = field(default_factory=list)
    skip: str = ""  # why the command is not run here (empty: run it)


def pages() -> list[Path]:
    """README.md, then the documentation's pages in the order of mkdocs.yml's nav."""
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text().replace("!!python", "#"))
    found: list[str] = []

    def walk(entry) -> None:
        if isinstance(entry, str):
            found.append(entry)
        elif isinstance(entry, dict):
            for value in entry.values():
                walk(value)
        elif isinstance(entry, list):
            for item in entry:
                walk(item)

    walk(config["nav"])
    return [REPO / "README.md", *(REPO / config.get("docs_dir", "docs") / page for page in found)]


def commands_of(path: Path) -> list[Command]:
    commands: list[Command] = []
    lines = path.read_text().splitlines()
    page = str(path.relative_to(REPO))
    in_block, language, marker, pending, start = False, "", "", "", 0
    previous = ""
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not in_block and stripped.startswith("```"):
            in_block, language = True, stripped[3:].strip().lower()
            marker = MARKERS.get(previous, "")
            continue
        if in_block and stripped == "```":
            in_block = False
            previous = stripped
            continue
        if not in_block:
            if stripped:
                previous = stripped
            continue
        if language not in SHELL_LANGUAGES:
            continue
        if not pending:
            if not stripped or stripped.startswith("#"):
                continue
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        commands.append(Command(page, start, (pending + stripped).strip(), marker))
        pending = ""
    return commands


def all_commands() -> list[Command]:
    return [command for path in pages() for command in commands_of(path)]


def _segments(tokens: list[str]) -> list[list[str]]:
    segments: list[list[str]] = [[]]
    for token in tokens:
        if token == "&&":
            segments.append([])
        else:
            segments[-1].append(token)
    return [segment for segment in segments if segment]


def _set_option(args: list[str], option: str, value: str) -> None:
    """Give ``option`` this value, replacing a value it had (``--opt V`` or ``--opt=V``)."""
    for index, arg in enumerate(args):
        if arg == option and index + 1 < len(args):
            args[index + 1] = value
            return
        if arg.startswith(option + "="):
            args[index] = f"{option}={value}"
            return
    args += [option, value]


def _drop_option(args: list[str], option: str) -> None:
    """Leave ``option`` and its value out (``--opt V`` or ``--opt=V``)."""
    for index, arg in enumerate(args):
        if arg == option:
            del args[index : index + 2]
            return
        if arg.startswith(option + "="):
            del args[index]
            return


def _value(args: list[str], option: str) -> str | None:
    for index, arg in enumerate(args):
        if arg == option and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(option + "="):
            return arg.split("=", 1)[1]
    return None


def _to_out(arg: str, out: Path) -> str:
    return re.sub(r"(^|=|,)out/", lambda m: f"{m.group(1)}{out}/", arg)


def _tool(name: str) -> Path:
    return Path(sys.executable).parent / ("python" if name == "python3" else name)


def _module_exists(module: str) -> bool:
    path = REPO / Path(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file() or (path / "__main__.py").is_file()


def _locust_variant(args: list[str], tool: str) -> tuple[list[str], str, frozenset[int]]:
    """The quick form of a Locust run; the skip reason when a file it loads is not there."""
    files = (_value(args, "-f") or "").split(",")
    for name in filter(None, files):
        if not (REPO / name).exists():
            return args, f"{name} does not exist (yet)", frozenset()
    shape = _value(args, "--shape") if tool == "locust-etcd" else None
    shape_files = [name for name in files if name.startswith("shapes/") or "shape" in Path(name).name]
    # a kill, an upgrade, a rollback or a replacement restarts members within the run: its page's run (seconds) is
    # kept whole, so that the member is back before the audit compares every member
    restarts = re.search(r"(^|,)(kill|upgrade|rollback|replace)[:@]", _value(args, "--etcd-disrupt") or "")
    if "-t" in args and not restarts:
        _set_option(args, "-t", RUN_TIME)
    for option, cap in (("-u", MAX_USERS), ("-r", MAX_USERS), ("--processes", MAX_PROCESSES)):
        value = _value(args, option)
        if value is not None and int(value) > cap:
            _set_option(args, option, str(cap))
    rate = _value(args, "--etcd-user-rate")
    if rate is not None and 0 < float(rate) < MIN_USER_RATE:
        # the page's many users share their requests; the few users of the quick run would send none in its seconds
        _set_option(args, "--etcd-user-rate", f"{MIN_USER_RATE:g}")
    if "--etcd-prometheus-port" in args:
        _set_option(args, "--etcd-prometheus-port", str(free_port()))
    if "--processes" in args and "--master-bind-port" not in args:
        # as the page says to when Locust's 5557 is taken: the forked workers dial --master-port
        port = str(free_port())
        args += ["--master-bind-host", "127.0.0.1", "--master-bind-port", port, "--master-port", port]
    kubernetes = any("Kubernetes" in arg for arg in args)
    if kubernetes:
        _set_option(args, "--etcd-k8s-objects", "pods:200,configmaps:50,leases:20")
        _set_option(args, "--etcd-k8s-nodes", "100")
    capacity = shape == "capacity" or any(name.endswith("capacity.py") for name in shape_files)
    if capacity:  # probes of 2 s from 100 QPS up to 200: one doubling, one bisection at most
        for option, value in (
            ("--shape-step-time", "2"),
            ("--shape-search-start", "100"),
            ("--shape-search-max", "200"),
            ("--shape-search-rounds", "1"),
        ):
            _set_option(args, option, value)
    elif shape or shape_files:
        _set_option(args, "--shape-time-scale", TIME_SCALE)
        if shape == "step-spike" or any(name.endswith("step_spike.py") for name in shape_files):
            _set_option(args, "--shape-max-qps", "300")  # baseline, one step, the spike
            _set_option(args, "--shape-spike-qps", "400")
    ok = frozenset({0, 3}) if "--etcd-sla" in args or capacity else frozenset({0})
    if kubernetes:  # a write that lost a race is the failure "k8s: conflict", and Locust exits 1 on any failure
        ok |= {1}
    return args, "", ok


def _suite_compares(args: list[str]) -> bool:
    """A benchmark suite run whose file has a ``compare:`` (as the runner reads it): it exits 3 when the change it
    compares is found worse."""
    if args[2:4] != ["etcd_users.suite", "run"] or len(args) < 5 or not (REPO / args[4]).is_file():
        return False
    return load_suite(REPO / args[4]).compare is not None


def _python_variant(args: list[str]) -> tuple[list[str], str, str]:
    """The quick form of ``python -m MODULE …``; the skip reason; the line a server prints once up."""
    if len(args) < 3 or args[1] != "-m":
        return args, f"not a `python -m` command: {shlex.join(args)}", ""
    module, rest = args[2], args[3:]
    if not _module_exists(module):
        return args, f"module {module} does not exist (yet)", ""
    if module == "etcd_users.suite" and rest and rest[0] in ("run", "check"):
        for arg in rest[1:]:
            if arg.endswith((".yaml", ".yml")) and not arg.startswith("-") and not glob.glob(str(REPO / arg)):
                return args, f"{arg} does not exist (yet)", ""
        if rest[0] == "run" and "--dry-run" not in rest and "--quick" not in rest:
            args.append("--quick")
        if rest[0] == "check":  # the shell's glob, expanded here
            expanded = [p for a in rest[1:] for p in sorted(glob.glob(str(REPO / a))) or [a]]
            args[4:] = [str(Path(p).relative_to(REPO)) if Path(p).is_absolute() else p for p in expanded]
    if module in ("analysis", "etcd_users.analysis"):
        args = [re.sub(r"^--warmup=\d+(\.\d+)?$", "--warmup=1", arg) for arg in args]
    if module == "benchmarks.efficiency":  # this tool and the floor only: the Go tool and another checkout are by hand
        _drop_option(args, "--go-benchmark")
        _drop_option(args, "--baseline-repo")
        for option, value in (("--seconds", "1"), ("--warmup", "0.5"), ("--repeat", "1"), ("--ops", "put")):
            _set_option(args, option, value)
        _set_option(args, "--conns", "1")
    if module == "benchmarks.concurrency":
        for option, value in (("--users", "200"), ("--base-users", "20"), ("--rate", "100"), ("--seconds", "1")):
            _set_option(args, option, value)
        _set_option(args, "--repeat", "1")
    if module == "benchmarks.processes":
        for option, value in (("--rate", "100"), ("--users", "8"), ("--seconds", "2"), ("--warmup", "1")):
            _set_option(args, option, value)
        _set_option(args, "--repeat", "1")
    if module == "benchmarks.ladder":  # this tool's side only: the Go tool is built by hand
        _drop_option(args, "--go-benchmark")
        for option, value in (("--rungs", "1,10"), ("--seconds", "1"), ("--processes", "1")):
            _set_option(args, option, value)
    if module == "benchmarks.watch_fanout":
        for option, value in (("--watchers", "0,10"), ("--consume-delays", "0"), ("--seconds", "1")):
            _set_option(args, option, value)
    if module == "benchmarks.memory":
        for option, value in (("--users", "50"), ("--rate", "1"), ("--sample-seconds", "1")):
            _set_option(args, option, value)
    if "--list-binaries" in rest:  # prints and exits
        return args, "", ""
    return args, "", SERVES_UNTIL.get(module, "")


def quick_variant(command: Command, out: Path) -> Plan:
    """What the test runs for ``command``: its quick variant, or why it is not run here."""
    if command.marker:
        return Plan(skip=command.marker)
    for prefix, reason in NOT_RUN.items():
        if re.search(rf"(^|/){re.escape(prefix)}\b", command.text):
            return Plan(skip=reason)
    for pattern, reason in RUN_BY_TESTS.items():
        if re.search(pattern, command.text):
            return Plan(skip=reason)
    plan = Plan()
    for segment in _segments(shlex.split(command.text, comments=True)):
        env: dict[str, str] = {}
        while segment and re.match(r"^[A-Z_][A-Z0-9_]*=", segment[0]):
            name, value = segment.pop(0).split("=", 1)
            env[name] = _to_out(value, out)
        if not segment or segment[0] == "echo":
            continue
        if (Path(segment[0]).name, *segment[1:3]) in SET_UP or (Path(segment[0]).name, *segment[1:2]) in SET_UP:
            continue
        tool = Path(segment[0]).name
        if tool not in TOOLS:
            raise ValueError(f"{command.where}: the test does not know how to run {segment[0]!r}; mark its block")
        executable = _tool(tool)
        if not executable.exists():
            return Plan(skip=f"{tool} is not installed (yet): {executable}")
        args = [_to_out(arg, out) for arg in segment]
        args[0] = str(executable)
        ok, serves = frozenset({0}), ""
        if tool in ("locust", "locust-etcd"):
            args, skip, ok = _locust_variant(args, tool)
        else:
            args, skip, serves = _python_variant(args)
            if args[2:4] == ["analysis", "compare"] or _suite_compares(args):
                ok = frozenset({0, 3})  # 3: a regression found, what a before/after page shows
        if skip:
            return Plan(skip=skip)
        tolerated = "k8s: conflict" if 1 in ok else ""
        plan.runs.append(Run(args, env, ok, serves, tolerated))
    if not plan.runs:
        return Plan(skip="nothing to run")
    return plan
