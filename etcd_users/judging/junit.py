"""``--etcd-junit FILE``: the run's gates, and a shape's per-level verdicts, as a JUnit XML report for CI.

One ``<testsuite name="locust-etcd">``: a test case per ``--etcd-sla`` gate (classname ``sla``, name the gate as
written; a ``disrupt:`` gate has one per window, the gate followed by the schedule's item), then, when a shape ran
whose record (``shape_record()``) holds per-level verdicts, a test case per level (classname ``levels``, name the
level's name). A failed gate or level is a ``<failure>`` whose message has the
measured value and the threshold; every case carries its measured values as ``<properties>`` and its PASS/FAIL line
in ``<system-out>``. A gate the run did not judge (no run started, or a shape that judges its gates per probe) and a
level without a verdict (no whole second with its users all running) are ``<skipped>``. A gate judged without data
(a request name that never ran) fails here as it fails the run.

The master (or the single process) writes the file when the run quits, whether gates failed or not; the exit code is
the run's own. ``check_path`` is called at start-up so that a path that cannot be written fails the command at once,
in one line, rather than after the run. Pure but for the file system.
"""

from __future__ import annotations

import datetime
import logging
import os
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from pathlib import Path

from etcd_users.core.arguments import SHOWN_PATH_CHARACTERS, shown
from etcd_users.judging.sla import Result
from etcd_users.judging.sla_specs import LATENCY_UNITS, Gate, parse_gate, parse_junit_path
from etcd_users.settings import SettingsError

logger = logging.getLogger("etcd_users.reporting.junit")  # the name users' log filters know

SUITE = "locust-etcd"
GATE_CLASS = "sla"
LEVEL_CLASS = "levels"
FAILED = "FAIL"


def check_path(path: str) -> None:
    """Make the report's directory if needed and prove it writable; SettingsError (one line) when it is not."""
    parse_junit_path(path)  # a directory's name, or too long a name: before any directory is made
    target = Path(path).expanduser()
    where = shown(path, SHOWN_PATH_CHARACTERS)
    if target.is_dir():
        raise SettingsError(f"--etcd-junit: {where} is a directory; give a file path such as reports/junit.xml")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", suffix=".probe"):
            pass
        if target.exists() and not os.access(target, os.W_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as error:
        reason = error.strerror or type(error).__name__
        file_above = next((parent for parent in target.parents if parent.exists() and not parent.is_dir()), None)
        if file_above is not None:
            reason = f"{file_above} is a file, not a directory"
        raise SettingsError(
            f"--etcd-junit: cannot write {where} ({reason}); give a path in a writable directory"
        ) from None


def recorded_levels(shape) -> list[dict]:
    """The levels of ``shape``'s record that hold a verdict (key ``verdict``: "pass", "FAIL" or None); [] without
    a shape, a record, or verdicts. A record that cannot be read is logged and left out."""
    record_of = getattr(shape, "shape_record", None)
    if record_of is None:
        return []
    try:
        levels = record_of().get("levels") or []
    except Exception as error:  # a report never stops the end of a run
        logger.warning("could not read the shape's record for its levels' verdicts: %s", error)
        return []
    return [level for level in levels if isinstance(level, dict) and "verdict" in level]


def _number(value: float) -> str:
    """Six decimals at most, no exponent: 0.007367, 92.688123, 1234567."""
    return f"{value:.6f}".rstrip("0").rstrip(".")


def _case(suite: ET.Element, classname: str, name: str, seconds: float = 0.0) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=classname, name=name, time=f"{max(seconds, 0.0):.3f}")


def _properties(case: ET.Element, values: Iterable[tuple[str, str]]) -> None:
    properties = ET.SubElement(case, "properties")
    for name, value in values:
        ET.SubElement(properties, "property", name=name, value=value)


def _gate_case(suite: ET.Element, gate: Gate, result: Result | None, why_not_judged: str) -> str:
    """One gate's test case (a ``disrupt:`` gate's: one per window, named after it); returns its outcome: "passed",
    "failed" or "skipped"."""
    case = _case(
        suite, GATE_CLASS, f"{gate.text} {result.window}" if result is not None and result.window else gate.text
    )
    threshold = gate.limit
    if result is None:
        _properties(case, (("threshold", threshold),))
        ET.SubElement(case, "skipped", message=f"not judged: {why_not_judged}")
        return "skipped"
    measured = "" if result.measured is None else _number(result.measured)
    _properties(case, (("measured", measured), ("shown", result.shown), ("threshold", threshold), ("unit", gate.unit)))
    if not result.passed:
        measured_text = f"measured {result.shown}" if result.measured is not None else result.shown
        message = f"{result.label}: {measured_text}, threshold {threshold}"
        ET.SubElement(case, "failure", message=message, type="SLA").text = result.line()
    ET.SubElement(case, "system-out").text = result.line()
    return "passed" if result.passed else "failed"


def _check_unit(gate_text: str) -> str:
    """The unit of a level check's ``measured`` (``level_verdicts.LevelCheck``): ms for latencies whatever the
    gate's unit, % or a count for errors, requests/s for QPS and the keep-up rule."""
    try:
        gate = parse_gate(gate_text)
    except SettingsError:
        return "qps"  # the keep-up rule
    if gate.unit in LATENCY_UNITS:
        return "ms"
    if gate.metric == "errors":
        return gate.unit or "count"
    return "qps"


def _level_case(suite: ET.Element, name: str, level: dict) -> str:
    start, end = level.get("start_s"), level.get("end_s")
    seconds = end - start if isinstance(start, (int, float)) and isinstance(end, (int, float)) else 0.0
    case = _case(suite, LEVEL_CLASS, name, seconds)
    checks = [check for check in level.get("checks") or [] if isinstance(check, dict)]
    values = [("verdict", str(level.get("verdict") or "")), ("users", str(level.get("users", "")))]
    if level.get("qps") is not None:
        values.append(("planned_qps", _number(level["qps"])))
    for check in checks:
        measured = check.get("measured")
        gate = str(check.get("gate", ""))
        values.append((f"{gate} ({_check_unit(gate)})", "" if measured is None else _number(measured)))
    _properties(case, values)
    lines = [str(check.get("line", "")) for check in checks]
    verdict = level.get("verdict")
    if verdict is None:
        ET.SubElement(case, "skipped", message="not judged: no whole second with its users all running")
        return "skipped"
    if str(verdict).upper() == FAILED:
        failed = [str(check.get("line", "")) for check in checks if not check.get("passed", True)]
        message = f"level '{level.get('name', name)}': " + ("; ".join(failed) or "FAIL")
        ET.SubElement(case, "failure", message=message, type="level").text = "\n".join(lines)
    ET.SubElement(case, "system-out").text = "\n".join(lines)
    return "failed" if str(verdict).upper() == FAILED else "passed"


def _unique_names(levels: Sequence[dict]) -> list[str]:
    names: list[str] = []
    for index, level in enumerate(levels, start=1):
        name = str(level.get("name") or f"level {index}")
        names.append(name if name not in names else f"{name} (#{index})")
    return names


def report(
    gates: Sequence[Gate],
    results: Sequence[Result],
    levels: Sequence[dict] = (),
    *,
    started_at: float | None = None,
    duration_s: float = 0.0,
    why_not_judged: str = "no run",
) -> ET.ElementTree:
    """The JUnit document: a case per gate (its result, or skipped when ``results`` has none for it), then a case
    per level of ``levels`` (``recorded_levels``)."""
    suites = ET.Element("testsuites", name=SUITE)
    suite = ET.SubElement(suites, "testsuite", name=SUITE)
    outcomes = []
    for gate in gates:
        judged = [result for result in results if result.gate == gate] or [None]
        outcomes += [_gate_case(suite, gate, result, why_not_judged) for result in judged]
    outcomes += [_level_case(suite, name, level) for name, level in zip(_unique_names(levels), levels, strict=True)]
    for element in (suites, suite):
        element.set("tests", str(len(outcomes)))
        element.set("failures", str(outcomes.count("failed")))
        element.set("errors", "0")
        element.set("skipped", str(outcomes.count("skipped")))
        element.set("time", f"{max(duration_s, 0.0):.3f}")
    if started_at:
        suite.set("timestamp", datetime.datetime.fromtimestamp(started_at).isoformat(timespec="seconds"))
    suite.set("hostname", os.uname().nodename)
    ET.indent(suites)
    return ET.ElementTree(suites)


def write(path: str, document: ET.ElementTree) -> bool:
    """Write the report whole (readers never see half a file); False, with one logged line, when it cannot."""
    target = Path(path).expanduser()
    partial = target.with_name(f".{target.name}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        document.write(partial, encoding="utf-8", xml_declaration=True)
        os.replace(partial, target)
    except OSError as error:
        logger.error("locust-etcd: error: --etcd-junit: could not write %s: %s", path, error.strerror or error)
        return False
    return True


def add_case(
    path: str, classname: str, name: str, output: str, failure: str | None, properties: Iterable[tuple[str, str]] = ()
) -> bool:
    """Append one test case (a ``<failure>`` when ``failure`` is given) to the report at ``path``, its counts
    updated; False, with one logged line, when there is no report to add it to or it cannot be written."""
    try:
        document = ET.parse(Path(path).expanduser())
    except (OSError, ET.ParseError) as error:
        logger.error("locust-etcd: error: --etcd-junit: could not add %r to %s: %s", name, path, error)
        return False
    suites = document.getroot()
    suite = suites.find("testsuite")
    if suite is None:
        suite = ET.SubElement(suites, "testsuite", name=SUITE)
    case = _case(suite, classname, name)
    _properties(case, properties)
    if failure is not None:
        ET.SubElement(case, "failure", message=failure.splitlines()[0], type=classname).text = failure
    ET.SubElement(case, "system-out").text = output
    for element in (suites, suite):
        element.set("tests", str(int(element.get("tests", "0")) + 1))
        element.set("failures", str(int(element.get("failures", "0")) + (failure is not None)))
    ET.indent(suites)
    return write(path, document)
