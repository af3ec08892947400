"""Running a suite's plan: one Locust process per run, against a fresh local etcd unless the suite gives endpoints,
each run judged from the files it left, and ``DIR/suite.json`` rewritten after every run (`SuiteRunner`).

A run that ends well leaves a ``.done`` marker with its fingerprint, so that the next invocation into the same
directory skips it; Ctrl-C or SIGTERM stops the current run and its etcd and keeps the runs already done.
"""

import csv
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from etcd_users.core.features import OPTIONS
from etcd_users.files import (
    AGGREGATED,
    RUN_DONE,
    RUN_FAILED,
    RUN_INTERRUPTED,
    RUN_PENDING,
    SUFFIXES,
    SUITE_FINISHED,
    SUITE_INTERRUPTED,
    SUITE_JSON,
    SUITE_RUNNING,
    SUITE_SCHEMA_VERSION,
)
from etcd_users.local import ClusterError, LocalCluster, cluster_from_settings, find_etcd_binary
from etcd_users.local.ports import free_ports
from etcd_users.suite.plan import (
    Combination,
    PlannedRun,
    combination_settings,
    combinations,
    compare_command,
    fingerprint,
    grid,
    locust_command,
    plan,
)
from etcd_users.suite.schema import OPTIONS_BY_NAME, RESERVED_OPTIONS, Suite

# Start-up of a run besides its duration (etcd, Locust, the endpoint check), until runs have been timed.
OVERHEAD_GUESS_SECONDS = {1: 4.0, 3: 6.0}
STOP_GRACE_SECONDS = 15.0
STDERR_TAIL_LINES = 12
POLL_SECONDS = 0.1


def local_cluster(suite: Suite, combo: Combination) -> LocalCluster:
    """The local etcd of one run, not started: the suite's members and etcd_args, and the combination's
    LOCAL_CLUSTER_OPTIONS (its binary, and the members' network through the peer proxy, with a warning logged where
    raft's timing is below etcd's tuning guide for the round trip)."""
    settings = combination_settings(suite, combo)  # checked when the suite was read
    cluster, _ = cluster_from_settings(settings, combo.members, extra_args=suite.etcd_args, name=f"suite-{os.getpid()}")
    return cluster


@dataclass
class RunRecord:
    """A run's entry in suite.json."""

    status: str = RUN_PENDING  # one of files.RUN_STATUSES
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
class RunOutcome:
    """What a run's files say about it: data (``ok``) or a failed run, in one line."""

    ok: bool
    summary: str
    requests: int | None = None
    failures: int | None = None
    error: str | None = None


def _paths(prefix: Path) -> dict[str, Path]:
    """The files of a run under its CSV prefix: Locust's and the runner's own (.done, .stdout, .stderr)."""
    base = prefix.parent
    return {
        "stats": base / f"{prefix.name}{SUFFIXES['stats']}",
        "exceptions": base / f"{prefix.name}{SUFFIXES['exceptions']}",
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
                if row.get("Name") == AGGREGATED:
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


def judge(prefix: Path, exit_code: int, duration: int) -> RunOutcome:
    """Locust exits 1 when requests failed: that is data. Anything else non-zero, or no data, is a failed run."""
    paths = _paths(prefix)
    totals = _totals(paths["stats"])
    exceptions = _exceptions(paths["exceptions"])
    requests, failures = totals if totals else (None, None)
    data_only = exit_code == 1 and failures and not exceptions
    if exit_code != 0 and not data_only:
        detail = f"; exceptions in the workload: {exceptions[0]}" if exceptions else ""
        return RunOutcome(
            False, f"locust exited with code {exit_code}{detail}", requests, failures, _tail(paths["stderr"])
        )
    if totals is None:
        return RunOutcome(False, f"no readable {paths['stats'].name}", error=_tail(paths["stderr"]))
    if requests == 0:
        return RunOutcome(
            False,
            f"no requests in {duration}s (a read workload writes its key space first: lengthen duration or lower "
            "key-space-size)",
            0,
            0,
            _tail(paths["stderr"]),
        )
    rate = f", {failures / requests:.1%} failed" if failures else ""
    return RunOutcome(True, f"{requests:,} requests, {failures:,} failures{rate}", requests, failures)


class Interrupted(Exception):
    """Ctrl-C or SIGTERM: stop the current run and the local etcd, keep finished runs."""


class Signals:
    """Turns SIGINT and SIGTERM into a flag the run loop polls, so that the runner stops Locust, then etcd, and writes
    suite.json in that order (an exception raised from a handler could strike anywhere, half-way through writing
    suite.json for one)."""

    def __init__(self) -> None:
        self.count = 0
        self.signum: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> "Signals":
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
class SuiteRunner:
    """Runs a suite's plan into the directory ``out``: `prepare` reads the runs done earlier, `execute` does the
    rest and returns the exit status (0 all done, 1 some failed, 130 or 143 interrupted)."""

    suite: Suite
    out: Path
    signals: Signals
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
        self._write_json(SUITE_RUNNING)
        self.echo(
            f"suite {self.suite.name}{' (quick)' if self.suite.quick else ''}: "
            f"{grid(self.suite, len(runs))}; {len(runs) - len(todo)} done earlier; "
            f"about {clock(self.estimate(todo))} left; output in {self.out}"
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
                if record.status == RUN_DONE:
                    self.echo(f"{head}: done earlier, skipped")
                    continue
                remaining = [later for later in runs[position:] if not self.is_done(later)]
                again = " (its earlier run had other settings: running again)" if record.stale else ""
                self.echo(f"{head}{again} … ETA {clock(self.estimate(remaining))}")
                self._execute(run, record)
                self._write_json(SUITE_RUNNING)
                if record.status == RUN_DONE:
                    self.echo(f"    ok in {record.seconds:.1f}s: {record.summary}")
                else:
                    failed.append(run)
                    self.echo(f"    FAILED after {record.seconds:.1f}s: {record.error}")
        except Interrupted:
            self._write_json(SUITE_INTERRUPTED)
            done = sum(record.status == RUN_DONE for record in self.records.values())
            self.echo(f"interrupted: {done}/{len(runs)} runs done and kept in {self.out}; run again to resume")
            return 130 if self.signals.signum != signal.SIGTERM else 143
        self._write_json(SUITE_FINISHED)
        done = sum(record.status == RUN_DONE for record in self.records.values())
        self.echo(
            f"suite {self.suite.name}: {done}/{len(runs)} runs done, {len(failed)} failed, in "
            f"{clock(time.monotonic() - started)}; {self.out / SUITE_JSON}"
        )
        for run in failed:
            self.echo(f"  failed: {run.relative_prefix} (log: {_paths(self.out / run.relative_prefix)['stderr']})")
        if failed:
            if self.suite.compare is not None:
                self.echo("compare: not made while runs failed; run the suite again to redo them")
            return 1
        return self._compare() if self.suite.compare is not None else 0

    def _compare(self) -> int:
        """The suite's ``compare:`` once every run is done: the table printed, the files written; 3 when a row is
        worse, as ``analysis compare`` says, 1 when it could not compare."""
        command = compare_command(self.suite, self.out)
        self.echo(f"compare: python {' '.join(command[1:])}")
        compared = subprocess.run(command, capture_output=True, text=True)
        for line in compared.stdout.rstrip().splitlines():
            self.echo(line)
        told = compared.stderr.strip().splitlines()
        if compared.returncode not in (0, 3):
            self.echo(f"compare failed: {told[-1] if told else f'exit code {compared.returncode}'}")
            return 1
        if told:
            self.echo(told[-1])  # the files written
        return compared.returncode

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
                    status=RUN_DONE,
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

    def is_done(self, run: PlannedRun) -> bool:
        return self.records[(run.combination.id, run.repeat)].status == RUN_DONE

    def estimate(self, runs: Sequence[PlannedRun]) -> float:
        def overhead(members: int) -> float:
            if self.overheads:
                return sum(self.overheads) / len(self.overheads)
            return OVERHEAD_GUESS_SECONDS.get(1 if self.suite.endpoints else members, 5.0)

        return sum(self.suite.duration + overhead(run.combination.members) for run in runs)

    def _execute(self, run: PlannedRun, record: RunRecord) -> None:
        prefix = self.out / run.relative_prefix
        paths = _paths(prefix)
        prefix.parent.mkdir(parents=True, exist_ok=True)
        paths["done"].unlink(missing_ok=True)  # a stale marker must not outlive the data it vouched for
        started = time.monotonic()
        record.status, record.started, record.error = RUN_INTERRUPTED, _now(), None
        cluster = None
        try:
            endpoints = self.suite.endpoints
            if not endpoints:
                cluster = local_cluster(self.suite, run.combination)
                try:
                    cluster.start(timeout=30)
                except ClusterError as error:
                    record.status, record.error = RUN_FAILED, f"local etcd did not start: {str(error).splitlines()[0]}"
                    return
                endpoints = ",".join(cluster.endpoints)
                self.signals.check()
            port = free_ports(1)[0] if run.combination.processes > 1 else 0
            command = locust_command(self.suite, run, prefix, endpoints, master_port=port)
            record.command = locust_command(self.suite, run, prefix, endpoints, mask=True, master_port=port)
            exit_code = self._locust(command, paths)
            record.exit_code = exit_code
            outcome = judge(prefix, exit_code, self.suite.duration)
            record.requests, record.failures = outcome.requests, outcome.failures
            if not outcome.ok:
                tail = f"\n{_indent(outcome.error)}" if outcome.error else ""
                record.status, record.error = RUN_FAILED, f"{outcome.summary}{tail}"
                return
            record.status, record.summary = RUN_DONE, outcome.summary
        finally:
            if cluster is not None:
                cluster.stop()
            record.seconds = round(time.monotonic() - started, 2)
        self.overheads.append(max(0.0, record.seconds - self.suite.duration))
        marker = {"fingerprint": fingerprint(self.suite, run), **_record_json(record, _MARKER_FIELDS)}
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
            "schema": SUITE_SCHEMA_VERSION,
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


_RECORD_FIELDS = (
    "status",
    "earlier",
    "started",
    "seconds",
    "exit_code",
    "requests",
    "failures",
    "summary",
    "error",
    "command",
)
"""A run's fields in ``suite.json``, in order."""

_MARKER_FIELDS = tuple(name for name in _RECORD_FIELDS if name not in ("status", "earlier", "error"))
"""Those a finished run's marker keeps (after its fingerprint): what a later execution takes up again."""


def _record_json(record: RunRecord, fields: tuple[str, ...] = _RECORD_FIELDS) -> dict:
    return {name: getattr(record, name) for name in fields}


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
    # The suite file alone decides a run: the tool's variables would set options behind its back. Secrets may stay
    # in the environment rather than in a suite file.
    secret_variables = {option.env_var for option in OPTIONS if option.secret}
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("LOCUST_ETCD_", "LOCUST_SHAPE_")) or key in secret_variables
    }
    environment["PYTHONUNBUFFERED"] = "1"
    return environment


def _stop(process: subprocess.Popen, signals: Signals) -> None:
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


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def clock(seconds: float) -> str:
    """Seconds as ``45s``, ``3m05s`` or ``1h02m``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
