"""The grammar of the gates a run is judged by (``--etcd-sla``) and of a report's path (``--etcd-junit``): pure, for
every part that judges or shows them (``etcd_users.judging.sla`` judges them; the gates' options parse with it)."""

import math
import operator
import re
from collections.abc import Callable
from typing import NamedTuple

from etcd_users.core.arguments import SHOWN_PATH_CHARACTERS, shown
from etcd_users.core.declare import SettingsError
from etcd_users.files import AGGREGATED

LATENCY_UNITS = {"us": 1.0, "µs": 1.0, "ms": 1000.0, "s": 1_000_000.0}  # to microseconds

OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}

_GATE = re.compile(
    r"""^\s*(?:(?P<name>.*\S)\s*:)?\s*
        (?P<metric>[A-Za-z][A-Za-z0-9.]*)\s*
        (?P<op><=|>=|<|>)\s*
        (?P<value>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*
        (?P<unit>[A-Za-zµ%/]+)?\s*$""",
    re.VERBOSE,
)

_GATE_EXAMPLE = "put:p99<15ms, p99.9<=10ms, errors<0.1% or qps>1000"

# a gate on each window of --etcd-disrupt: the costs measure the gap, P99, P99.9 and errors of each request name
DISRUPT = "disrupt"
DISRUPT_PERCENTILES = (99.0, 99.9)
_DISRUPT_EXAMPLE = "disrupt:gap<2s, disrupt:put:p99<50ms, disrupt:p99.9<80ms or disrupt:errors<1%"


# a gate on the members' own metrics over the run (or a shape's level), judged on the worst member
# (etcd_users.members.member_figures): metric -> (the figure it reads, the kind of unit it takes)
MEMBER = "member"
MEMBER_METRICS = {
    "fsync_p99": ("fsync_p99_ms", "latency"),
    "commit_p99": ("commit_p99_ms", "latency"),
    "peer_rtt_p99": ("peer_rtt_p99_ms", "latency"),
    "snapshot_p99": ("snapshot_save_p99_ms", "latency"),
    "leader_changes": ("leader_changes", "count"),
    "slow_applies": ("slow_applies", "count"),
    "db_quota": ("db_quota_pct", "%"),
}
_MEMBER_UNITS = {"latency": "us, ms or s", "count": "no unit (a count)", "%": "% (of the quota)"}
_MEMBER_GATE = re.compile(
    r"""^\s*(?P<metric>[A-Za-z][A-Za-z0-9_.]*)\s*
        (?P<op><=|>=|<|>)\s*
        (?P<value>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*
        (?P<unit>[A-Za-zµ%/]+)?\s*$""",
    re.VERBOSE,
)
_MEMBER_EXAMPLE = "member:fsync_p99<10ms, member:leader_changes<1 or member:db_quota<80%"

# a gate on the staleness of serializable reads (etcd_users.audit_trail.reads), judged on the worst member:
# milliseconds behind (stale:p99<100ms), or revisions behind (stale:revisions:p99<50)
STALE = "stale"
STALE_REVISIONS = "revisions"
_STALE_EXAMPLE = "stale:p99<100ms or stale:revisions:p99<50"

# ready sets: a name inside --etcd-sla that stands for the gates it expands to (docs/gates.md gives their sources)
READY_SETS = {
    # the etcd thresholds of Kubernetes' scale tests: kube-burner's etcd alerts (WAL fsync P99 above 10 ms, peer
    # round-trip P99 above 100 ms, any leader change) and clusterloader2's etcd checks
    "kubernetes-etcd": ("member:fsync_p99<10ms", "member:peer_rtt_p99<100ms", "member:leader_changes<1"),
}


class SlaError(SettingsError):
    """A gate that cannot be read, told in one line."""


class Gate(NamedTuple):
    """One threshold. ``name`` None: all requests. ``percentile`` for pNN gates; ``threshold`` in ``unit``."""

    text: str
    name: str | None
    metric: str  # "percentile", "mean", "max", "errors", "qps"
    percentile: float | None
    op: str
    threshold: float
    unit: str  # a latency unit, "%" or "" (errors as a count, qps)
    disrupt: bool = False  # judged on each window of --etcd-disrupt, not on the whole run
    member: bool = False  # judged on the members' own metrics (the worst member), metric one of MEMBER_METRICS
    stale: bool = False  # judged on the serializable reads' staleness (the worst member); name "revisions" or None

    @property
    def label(self) -> str:
        if self.member:
            return f"{MEMBER} {self.metric}"
        metric = f"p{self.percentile:g}" if self.metric == "percentile" else self.metric
        if self.stale:
            return f"{STALE} {self.name} {metric}" if self.name else f"{STALE} {metric}"
        if self.disrupt:  # no name: every request name, no aggregate (the costs are per name)
            return f"{DISRUPT} {self.name} {metric}" if self.name else f"{DISRUPT} {metric}"
        return f"{self.name or AGGREGATED} {metric}"

    @property
    def limit(self) -> str:
        return f"{self.op} {self.threshold:g}{self.unit}"


def _gate_error(gate: str, why: str, disrupt: bool = False) -> SlaError:
    if disrupt:
        expected = f"expected disrupt:[NAME:]METRIC<VALUE such as {_DISRUPT_EXAMPLE}"
        return SlaError(f"--etcd-sla: {shown(gate)} {why}: {expected}")
    ready = " or ".join(READY_SETS)
    return SlaError(
        f"--etcd-sla: {shown(gate)} {why}: expected NAME:METRIC<VALUE such as {_GATE_EXAMPLE}, or a ready set: {ready}"
    )


def _gate_percentile(gate: str, digits: str, disrupt: bool = False) -> float:
    # p999 and p9999 are the usual shorthand for 99.9 and 99.99
    if "." not in digits and len(digits) > 2 and digits.startswith("99"):
        digits = f"99.{digits[2:]}"
    try:
        value = float(digits)
    except ValueError:
        raise _gate_error(gate, "has an unknown metric", disrupt) from None
    if not 0 < value <= 100:
        why = f"asks for percentile {digits if len(digits) < 20 else shown(digits)}, outside 0-100"
        raise _gate_error(gate, why, disrupt)
    return value


def parse_gate(text: str) -> Gate:
    """One gate such as ``put:p99<15ms`` or ``disrupt:gap<2s``; SlaError names the gate and the expected form."""
    gate = text.strip()
    head, colon, rest = gate.partition(":")
    if colon and head.strip().lower() == DISRUPT:
        return _disrupt_gate(gate, rest)
    if colon and head.strip().lower() == MEMBER:
        return _member_gate(gate, rest)
    if colon and head.strip().lower() == STALE:
        return _stale_gate(gate, rest)
    parsed = _parse(gate, gate)
    if parsed.metric == "gap":
        raise _gate_error(gate, "judges a gap, which only a disruption has (write disrupt:gap<2s with --etcd-disrupt)")
    return parsed


def _disrupt_gate(gate: str, body: str) -> Gate:
    """``disrupt:[NAME:]METRIC<VALUE``: gap, p99, p99.9 or errors, judged on each window's cost."""
    parsed = _parse(gate, body, disrupt=True)
    if parsed.metric in ("mean", "max", "qps"):
        why = f"asks a disruption for {parsed.metric} (disrupt: takes gap, p99, p99.9 or errors)"
        raise _gate_error(gate, why, True)
    if parsed.metric == "percentile" and parsed.percentile not in DISRUPT_PERCENTILES:
        raise _gate_error(gate, f"asks a disruption for p{parsed.percentile:g} (its cost has p99 and p99.9)", True)
    return parsed._replace(text=gate, disrupt=True)


def _member_gate(gate: str, body: str) -> Gate:
    """``member:METRIC<VALUE``: one of MEMBER_METRICS in the unit its kind takes."""
    accepted = ", ".join(MEMBER_METRICS)

    def refused(why: str) -> SlaError:
        return SlaError(f"--etcd-sla: {shown(gate)} {why}: expected member:METRIC<VALUE such as {_MEMBER_EXAMPLE}")

    match = _MEMBER_GATE.match(body)
    if match is None:
        raise refused(f"is not a gate (member: takes {accepted})")
    metric, op, unit = match["metric"].lower(), match["op"], (match["unit"] or "").lower()
    if metric not in MEMBER_METRICS:
        raise refused(f"has an unknown metric {shown(match['metric'])} (member: takes {accepted})")
    threshold = float(match["value"])
    if not math.isfinite(threshold):
        raise refused(f"has a threshold of {len(match['value'])} digits, beyond any number")
    kind = MEMBER_METRICS[metric][1]
    if (kind == "latency" and unit not in LATENCY_UNITS) or (kind == "count" and unit) or (kind == "%" and unit != "%"):
        why = "has no unit" if not unit else f"has the unit {shown(unit)}"
        raise refused(f"{why} ({metric} takes {_MEMBER_UNITS[kind]})")
    if kind == "%" and threshold > 100:
        raise refused("asks for more than 100% of the quota")
    return Gate(gate, None, metric, None, op, threshold, unit, member=True)


def _stale_gate(gate: str, body: str) -> Gate:
    """``stale:[revisions:]METRIC<VALUE``: pNN or max of the milliseconds (a latency unit) or revisions (no unit)."""

    def refused(why: str) -> SlaError:
        return SlaError(
            f"--etcd-sla: {shown(gate)} {why}: expected stale:[revisions:]METRIC<VALUE such as {_STALE_EXAMPLE}"
        )

    head, colon, rest = body.partition(":")
    revisions = bool(colon) and head.strip().lower() == STALE_REVISIONS
    try:
        parsed = _parse(gate, rest if revisions else body, counts=revisions)
    except SlaError as error:
        why = str(error).partition(f"{shown(gate)} ")[2].partition(": expected")[0] or "is not a gate"
        raise refused(why) from None
    if parsed.name is not None:
        raise refused(f"judges {shown(parsed.name)} (stale: takes milliseconds, or revisions:)")
    if parsed.metric not in ("percentile", "max"):
        raise refused(f"asks for {parsed.metric} (stale: takes pNN or max)")
    return parsed._replace(text=gate, name=STALE_REVISIONS if revisions else None, stale=True)


def _parse(gate: str, body: str, disrupt: bool = False, counts: bool = False) -> Gate:
    def refused(why: str) -> SlaError:
        return _gate_error(gate, why, disrupt)

    match = _GATE.match(body)
    if match is None:
        raise refused("is not a gate")
    name = match["name"]
    name = None if name is None or name.strip() in ("", "*") else name.strip()
    metric_text, op, unit = match["metric"].lower(), match["op"], (match["unit"] or "").lower()
    threshold = float(match["value"])
    if not math.isfinite(threshold):  # 400 digits make inf, which every comparison gets wrong
        raise refused(f"has a threshold of {len(match['value'])} digits, beyond any number")
    if metric_text.startswith("p") and metric_text[1:2].isdigit():
        metric, percentile = "percentile", _gate_percentile(gate, metric_text[1:], disrupt)
    elif metric_text in ("mean", "avg", "max"):
        metric, percentile = ("max" if metric_text == "max" else "mean"), None
    elif metric_text in ("errors", "qps", "gap"):
        metric, percentile = metric_text, None
    elif disrupt:
        raise refused(f"has an unknown metric {shown(match['metric'])} (gap, p99, p99.9 or errors)")
    else:
        raise refused(f"has an unknown metric {shown(match['metric'])} (pNN, mean, max, errors or qps)")
    if counts:
        if unit:
            raise refused(f"has the unit {shown(unit)} (revisions take none)")
    elif metric in ("percentile", "mean", "max", "gap"):
        if unit not in LATENCY_UNITS:
            why = "has no unit" if not unit else f"has the unit {shown(unit)}"
            raise refused(f"{why} (latencies take us, ms or s)")
    elif metric == "errors":
        if unit not in ("", "%"):
            raise refused(f"has the unit {shown(unit)} (errors take % for a share, none for a count)")
        if unit == "%" and threshold > 100:
            raise refused("asks for more than 100% of errors")
    elif unit not in ("", "/s"):
        raise refused(f"has the unit {shown(unit)} (qps takes none: requests per second)")
    else:
        unit = ""
    return Gate(gate, name, metric, percentile, op, threshold, unit)


def request_gates(gates: tuple[Gate, ...]) -> tuple[Gate, ...]:
    """The gates judged on requests over a span of time (the run, a level, a window): all but ``disrupt:``,
    ``member:`` and ``stale:``."""
    return tuple(gate for gate in gates if not gate.disrupt and not gate.member and not gate.stale)


def member_gates(gates: tuple[Gate, ...]) -> tuple[Gate, ...]:
    return tuple(gate for gate in gates if gate.member)


def stale_gates(gates: tuple[Gate, ...]) -> tuple[Gate, ...]:
    return tuple(gate for gate in gates if gate.stale)


def disruption_gates(gates: tuple[Gate, ...]) -> tuple[Gate, ...]:
    return tuple(gate for gate in gates if gate.disrupt)


def parse_gates(text: str) -> tuple[Gate, ...]:
    """``--etcd-sla``: comma-separated gates and names of READY_SETS (each stands for its gates); empty text, no
    gates."""
    gates: list[Gate] = []
    for part in text.split(","):
        if not part.strip():
            continue
        ready = READY_SETS.get(part.strip().lower())
        if ready:
            gates.extend(parse_gate(gate) for gate in ready)
        else:
            gates.append(parse_gate(part))
    return tuple(gates)


NAME_MAX_BYTES = 255  # the longest file name Linux file systems take


def parse_junit_path(path: str) -> str:
    """A file path for the JUnit report; whether its directory is writable is checked on the master at start-up
    (``reporting.junit.check_path``), not here: a worker's file system is not the master's."""
    return parse_report_path("--etcd-junit", path, "reports/junit.xml")


def parse_report_path(flag: str, path: str, example: str) -> str:
    """A file path a report is written to at the end of the run, or empty; ``example`` shows the form."""
    if not path:
        return path
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if path.endswith("/") or name in ("", ".", ".."):
        raise SettingsError(
            f"{flag}: {shown(path, SHOWN_PATH_CHARACTERS)} names a directory; give a file path such as {example}"
        )
    if any(len(part.encode(errors="surrogateescape")) > NAME_MAX_BYTES for part in path.split("/")):
        raise SettingsError(
            f"{flag}: {shown(path, SHOWN_PATH_CHARACTERS)} has a name longer than {NAME_MAX_BYTES} bytes, which "
            f"no file system takes; give a file path such as {example}"
        )
    return path
