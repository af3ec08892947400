"""The plan of a suite: every combination of its axes, the runs repeat by repeat, the Locust command of a run, and
the fingerprint that tells whether a run done earlier still matches the suite."""

import argparse
import hashlib
import itertools
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from etcd_users.core.features import OPTIONS
from etcd_users.settings import EtcdSettings, settings_from_options
from etcd_users.suite.schema import LOCAL_CLUSTER_OPTIONS, OPTIONS_BY_NAME, SETTING_AXES, Suite


@dataclass(frozen=True)
class Combination:
    id: str  # directory name under the output directory
    values: dict  # axis part -> value (a user_class list joined with '+')
    users: int
    spawn_rate: float
    user_class: tuple[str, ...]
    members: int
    processes: int  # Locust's --processes: the users and each process's --etcd-conns connections per endpoint
    options: dict  # option name -> value: fixed and axes (the command line's, and LOCAL_CLUSTER_OPTIONS' cluster's)

    @property
    def label(self) -> str:
        return " ".join(f"{name}={label_text(value)}" for name, value in self.values.items()) or "(single combination)"


@dataclass(frozen=True)
class PlannedRun:
    """One Locust process of the plan: a combination's repeat."""

    combination: Combination
    repeat: int  # 1-based
    index: int  # 1-based position in the plan

    @property
    def relative_prefix(self) -> str:
        return f"{self.combination.id}/rep{self.repeat}"


def label_text(value: object) -> str:
    """A value as the combinations' labels (and DIR:AXIS=VALUE) write it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, tuple | list):
        return "+".join(map(label_text, value))
    return str(value)


def _id_part(name: str, value: object) -> str:
    label = "class" if name == "user_class" else name
    return f"{label}={re.sub(r'[^A-Za-z0-9.+-]', '-', label_text(value))}"


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
                values={name: label_text(value) if name == "user_class" else value for name, value in values.items()},
                users=users,
                spawn_rate=suite.spawn_rate if suite.spawn_rate is not None else float(users),
                user_class=values.get("user_class", suite.user_class),
                members=values.get("members", suite.members),
                processes=values.get("processes", suite.processes),
                options=options,
            )
        )
    return result


def plan(suite: Suite) -> list[PlannedRun]:
    """All runs, repeat by repeat: a drift of the machine spreads over every combination, and a suite stopped
    half-way has whole repeats of the table."""
    combos = combinations(suite)
    runs = [PlannedRun(combo, repeat, 0) for repeat in range(1, suite.repeats + 1) for combo in combos]
    return [PlannedRun(run.combination, run.repeat, index) for index, run in enumerate(runs, start=1)]


def grid(suite: Suite, runs: int) -> str:
    """The size of a plan of ``runs`` runs in words: combinations × repeats = runs of the duration."""
    combos = runs // suite.repeats
    return (
        f"{_plural(combos, 'combination')} × {_plural(suite.repeats, 'repeat')} = {_plural(runs, 'run')} "
        f"of {suite.duration}s"
    )


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def locust_command(
    suite: Suite, run: PlannedRun, prefix: Path, endpoints: str, mask: bool = False, master_port: int | str = 0
) -> list[str]:
    """The Locust command line of one run; with ``mask``, secrets shown as ***. A run of several processes binds
    its master to ``master_port`` on 127.0.0.1 (Locust's default port would clash with any other run's)."""
    combo = run.combination
    command = [
        sys.executable, "-m", "locust",
        "-f", str(suite.locustfile),
        "--headless", "--only-summary",
        "-u", str(combo.users),
        "-r", label_text(combo.spawn_rate),
        "-t", f"{suite.duration}s",
        "--csv", str(prefix),
        *combo.user_class,
        "--etcd-endpoints", endpoints,
    ]  # fmt: skip
    if combo.processes > 1:
        port = str(master_port)
        command += ["--processes", str(combo.processes), "--master-bind-host", "127.0.0.1"]
        command += ["--master-bind-port", port, "--master-port", port]
    options = dict(combo.options)
    if suite.endpoints and "cleanup" not in options:
        # a shared cluster keeps what a run wrote: the next run's check of the prefix would refuse it
        options["cleanup"] = True
    for name, value in options.items():
        if name in LOCAL_CLUSTER_OPTIONS:
            continue
        option = OPTIONS_BY_NAME[name]
        if isinstance(option.default, bool):
            if value:
                command.append(option.flag)
            continue
        command += [option.flag, "***" if mask and option.secret and value else _option_text(value)]
    return command


def combination_settings(suite: Suite, combo: Combination) -> EtcdSettings:
    """The settings a combination's options make, as its run's Locust process would (a SettingsError when bad)."""
    namespace = argparse.Namespace(**{option.dest: option.default for option in OPTIONS})
    for name, value in combo.options.items():
        setattr(namespace, OPTIONS_BY_NAME[name].dest, value)
    namespace.etcd_endpoints = suite.endpoints
    return settings_from_options(namespace)


def _option_text(value: object) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def fingerprint(suite: Suite, run: PlannedRun) -> str:
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
        # only when several: the runs of one process done before processes existed stay done
        **({"processes": combo.processes} if combo.processes > 1 else {}),
        "options": {name: label_text(value) for name, value in sorted(combo.options.items())},
        **target,
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=list).encode()).hexdigest()


def compare_command(suite: Suite, out: Path) -> list[str]:
    """The comparison of the suite's ``compare:``, as ``python -m etcd_users.analysis compare`` makes it: one value of
    the axis against the other, combination by combination, its files in ``OUT/compare``."""
    compare = suite.compare
    sides = [f"{out}:{compare.axis}={value}" for value in (compare.baseline, compare.candidate)]
    changed = ["--changed", ",".join(compare.changed)] if compare.changed else []
    return [sys.executable, "-m", "etcd_users.analysis", "compare", *sides, *changed, "--out", str(out / "compare")]
