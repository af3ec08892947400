"""Levels judged live on real runs: one log line per level, the verdicts in PREFIX_shape.json (the ones the analysis
finds afterwards, on the same figures), the stop at the first failing level, and a capacity search with two workers
whose result agrees with its own probes.

What a level achieves depends on the machine, so no test here expects a figure: each verdict is checked against the
rules applied to that level's own measured figures (the gates and the keep-up rule, achieved >= KEEP_UP of planned),
and the gates are chosen so that a step fails on any machine: ``put:qps<200`` at a planned 250 QPS fails the gate
when the level keeps up (>= 237.5 QPS) and the keep-up rule when it does not."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from checks import assert_no_traceback, refusal_line
from support import free_port, run_analysis, run_locust, start_locust

from etcd_users.features.shapes.judging import WAIT_S
from etcd_users.judging.level_verdicts import KEEP_UP, KEEP_UP_GATE

pytestmark = pytest.mark.e2e

LOOSE_GATE = "put:p99<2s"
SEARCH_MAX = 16000
# a probe's users are all running once the workers' reports say so (every 3 s) after its ramp: 8 s leave a probe a few
# whole seconds to be judged on even when a busy machine delays the spawning and the reports
PROBE_S = 8
PROBES_AT_MOST = 5  # 2000, 4000, 8000, 16000 QPS, then one bisection probe
P99_LIMIT_MS = 2000.0
QPS_LIMIT = 200.0
# no QPS level above the baseline can pass both: below QPS_LIMIT is below KEEP_UP of its plan
GATES = f"{LOOSE_GATE},put:qps<{QPS_LIMIT:g}"
# 50 QPS for 5 s, then 250 and 450 QPS (10 requests/s per user): the baseline may pass or fail, each step fails
STEPS = (
    "--etcd-user-rate", "10",
    "--shape-baseline-qps", "50", "--shape-baseline-time", "5",
    "--shape-step-qps", "200", "--shape-step-time", "5", "--shape-max-qps", "450", "--shape-spike-time", "0",
)  # fmt: skip
STEPS_PLAN_S = 15  # the three levels' planned seconds
assert QPS_LIMIT < KEEP_UP * 250


def level_lines(log: str) -> list[str]:
    return [
        line.split(": ", 1)[1] for line in log.splitlines() if re.search(r"/etcd_users\.shapes\.base: level '", line)
    ]


def analysis_levels(prefix: Path, out: Path) -> tuple[dict[str, dict], dict]:
    result = run_analysis(prefix, "--out", out)
    assert result.returncode == 0, result.stderr
    document = json.loads((out / "levels.json").read_text())
    return {row["level"]: row for row in document["runs"][0]["levels"]}, document


def expected_check(check: dict, planned_qps: float | None) -> tuple[bool, str]:
    """Whether a recorded check passes by its rule on its own measured figure, and the line it then shows."""
    measured = check["measured"]
    if check["gate"] == KEEP_UP_GATE:
        passed = measured >= KEEP_UP * planned_qps
        relation = ">=" if passed else "<"
        return passed, f"achieved {measured:.1f} QPS {relation} {100 * KEEP_UP:g}% of planned {planned_qps:g}"
    if check["gate"] == LOOSE_GATE:  # measured in ms, shown in s
        passed = measured < P99_LIMIT_MS
        return passed, f"put p99 {measured / 1000:.6f}s {'<' if passed else '>' if measured > P99_LIMIT_MS else '='} 2s"
    assert check["gate"] == f"put:qps<{QPS_LIMIT:g}", check
    passed = measured < QPS_LIMIT
    return passed, f"put qps {measured:.1f}/s {'<' if passed else '>' if measured > QPS_LIMIT else '='} {QPS_LIMIT:g}"


def assert_judged_by_its_figures(level: dict) -> None:
    """A judged level's verdict and checks agree with the gates and the keep-up rule on its measured figures."""
    checks = level["checks"]
    assert [check["gate"] for check in checks] == [*GATES.split(","), KEEP_UP_GATE], level
    for check in checks:
        passed, line = expected_check(check, level["qps"])
        assert (check["passed"], check["line"]) == (passed, line), (level["name"], check)
    assert level["verdict"] == ("pass" if all(check["passed"] for check in checks) else "FAIL"), level
    step = level["qps"] > QPS_LIMIT / KEEP_UP
    assert not step or level["verdict"] == "FAIL", level  # a step passes neither by its QPS gate nor by keeping up


def verdict_line(level: dict) -> str:
    """The log line of a level, from its recorded checks."""
    if level["verdict"] is None:
        return f"level '{level['name']}': not judged (no whole second with its users all running)"
    if level["verdict"] == "FAIL":
        return f"level '{level['name']}': FAIL " + "; ".join(c["line"] for c in level["checks"] if not c["passed"])
    return f"level '{level['name']}': pass (" + "; ".join(c["line"] for c in level["checks"]) + ")"


@pytest.mark.slow
def test_a_step_run_is_judged_level_by_level_and_stops_at_the_first_failing_level(etcd1, tmp_out):
    prefix = tmp_out / "steps"
    result = run_locust(
        "-f", "locustfile.py,shapes/step_spike.py", "--headless", "--only-summary", "--csv", str(prefix),
        "--etcd-endpoints", ",".join(etcd1.endpoints), "--etcd-prefix", "/live-levels-e2e/", "--etcd-cleanup",
        *STEPS, "--etcd-sla", GATES, "--shape-stop-on-breach", "EtcdPutUser",
        timeout=90,
    )  # fmt: skip
    assert_no_traceback(result.stderr)
    shape = json.loads((tmp_out / "steps_shape.json").read_text())
    levels = shape["levels"]
    assert [(level["name"], level["qps"]) for level in levels] == [("baseline", 50), ("step 1", 250), ("step 2", 450)]
    verdicts = [level["verdict"] for level in levels]
    print("\n".join(f"{level['name']}: {level['verdict']} {[c['line'] for c in level['checks']]}" for level in levels))

    # the first failing level is where the run stopped: a step fails whenever it is judged, so it is at most step 1
    assert "FAIL" in verdicts, result.stderr[-3000:]
    first_fail = verdicts.index("FAIL")
    stopped = levels[first_fail]
    assert first_fail <= 1 and all(verdict in ("pass", None) for verdict in verdicts[:first_fail]), verdicts
    assert shape["stopped"] == f"level '{stopped['name']}' failed (--shape-stop-on-breach)"
    assert "shape: stopped at" in result.stderr and shape["stopped"] in result.stderr
    for later in levels[first_fail + 1 :]:
        assert later["started_at"] is None and later["verdict"] is None, later  # stopped before it began
    assert stopped["ended_at"] <= shape["ended_at"]

    # every judged level: its verdict is the rules' on its own figures, and it has one log line saying so
    judged = [level for level in levels if level["verdict"] is not None]
    for level in judged:
        assert_judged_by_its_figures(level)
    logged = [verdict_line(level) for level in levels[: first_fail + 1]]
    assert level_lines(result.stderr) == logged, result.stderr[-3000:]

    # the analysis, afterwards, from the files: the same verdicts on the same figures
    rows, document = analysis_levels(prefix, tmp_out / "report")
    assert list(rows) == [level["name"] for level in levels]
    for live in judged:
        row = rows[live["name"]]
        assert row["verdict"].split(" ")[0] == live["verdict"], (live["name"], row["verdict"])
        assert row["p99_ms"] == pytest.approx(live["checks"][0]["measured"], abs=1e-9), live["name"]
        assert row["achieved_qps"] == pytest.approx(live["checks"][-1]["measured"], abs=1e-9), live["name"]
    for never in levels[first_fail + 1 :]:
        assert rows[never["name"]]["verdict"] == "not measured"
    assert document["first_breach"]["level"] == stopped["name"]


@pytest.mark.slow
def test_capacity_search_with_two_workers_brackets_the_capacity_by_its_own_probes(etcd1, tmp_out):
    """Probes of 2000, 4000, 8000, 16000 QPS until one fails (where depends on the machine), then one bisection
    probe; the master decides, and its result agrees with its probes whatever they achieved."""
    prefix = tmp_out / "search"
    port = free_port()
    master = start_locust(
        "-f", "locustfile.py,shapes/capacity.py", "--headless", "--only-summary", "--csv", str(prefix),
        "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port), "--expect-workers", "2",
        "--etcd-endpoints", ",".join(etcd1.endpoints), "--etcd-prefix", "/capacity-e2e/", "--etcd-cleanup",
        "--etcd-user-rate", "50", "--etcd-sla", LOOSE_GATE, "--shape-search-start", "2000",
        "--shape-search-max", str(SEARCH_MAX), "--shape-search-rounds", "1", "--shape-step-time", str(PROBE_S),
        "EtcdPutUser",
        log_dir=tmp_out,
    )  # fmt: skip
    worker = ("-f", "locustfile.py", "--worker", "--master-host", "127.0.0.1", "--master-port", str(port))
    with master, start_locust(*worker, log_dir=tmp_out) as first, start_locust(*worker, log_dir=tmp_out) as second:
        # each probe, then up to WAIT_S for its verdict, twice over for a busy machine, and a minute to start and stop
        finished = master.finish(timeout=2 * PROBES_AT_MOST * (PROBE_S + WAIT_S) + 60)
        for process in (first, second):
            assert process.finish(timeout=30).returncode == 0
    assert_no_traceback(finished.stderr)
    assert "2 workers connected" in finished.stderr
    capacity = json.loads((tmp_out / "search_capacity.json").read_text())
    shape = json.loads((tmp_out / "search_shape.json").read_text())
    probes = capacity["probes"]
    print("\n".join(f"{p['level']}: {p['qps']:g} QPS {p['verdict']} {p['achieved_qps']}" for p in probes))
    assert finished.returncode == (0 if capacity["capacity_qps"] is not None else 3), finished.stderr[-3000:]

    # every probe is a level of the record, with the same verdict; a probe whose users were all running is judged
    # and has a log line (its verdict, or "not judged"), one whose users never were (a busy machine spawned them or
    # reported them too late) has neither
    assert [(p["level"], p["verdict"]) for p in probes] == [(lv["name"], lv["verdict"]) for lv in shape["levels"]]
    running = [lv["name"] for lv in shape["levels"] if lv["running_at"] is not None]
    assert [line.split("'")[1] for line in level_lines(finished.stderr)] == running, finished.stderr[-3000:]
    assert all(lv["verdict"] is None for lv in shape["levels"] if lv["name"] not in running), shape["levels"]
    judged = [p for p in probes if p["verdict"] is not None]
    if len(judged) < len(probes):
        # a master marks a level running once the workers report its user count (every 3 s): after the overloaded
        # probe, a short probe may hold no whole second of it; the search ends there and says so
        assert probes[-1]["verdict"] is None and len(judged) == len(probes) - 1, probes
        assert capacity["ended_because"].startswith(f"the probe at {probes[-1]['qps']:g} QPS could not be judged")
    # doubling until the first failure (or up to --shape-search-max, if no probe fails), then one probe inside the
    # bracket; where the first failure comes is the machine's, the sequence around it is not
    assert all(p["verdict"] in ("pass", "FAIL") for p in judged)
    failing = [i for i, p in enumerate(probes) if p["verdict"] == "FAIL"]
    grown = failing[0] + 1 if failing else len(probes)
    assert [p["qps"] for p in probes[:grown]] == [min(2000 * 2**i, SEARCH_MAX) for i in range(grown)]
    assert len(probes) <= grown + 1  # one bisection round
    assert [p["phase"] for p in probes] == ["grow"] * grown + ["bisect"] * (len(probes) - grown)
    # the bracket agrees with the probes: the highest passing QPS below the lowest failing one
    passing = [p["qps"] for p in probes if p["verdict"] == "pass"]
    low, high = capacity["bracket"]["low"], capacity["bracket"]["high"]
    assert low == (max(passing) if passing else None)
    assert high == (min(probes[i]["qps"] for i in failing) if failing else None)
    assert capacity["capacity_qps"] == low and (low is None or high is None or low < high)
    assert capacity["complete"] is True and capacity["gates"] == [LOOSE_GATE]
    assert capacity["summary"] in finished.stderr
    if low is not None and high is not None:
        assert capacity["summary"].startswith(f"capacity: {low:g} QPS (bracket {low:g}–{high:g}) under {LOOSE_GATE}")
    elif low is not None:  # every probe passed, up to the maximum
        assert capacity["ended_because"] == f"--shape-search-max {SEARCH_MAX} QPS passed", capacity
        assert capacity["summary"].startswith(f"capacity: at least {low:g} QPS (no probe up to it failed)")
    elif high is not None:
        assert capacity["summary"].startswith(f"capacity: below {high:g} QPS (the first probe failed)")

    # a run whose levels were decided live: the analysis reads it as any other, to the same verdicts
    rows, _document = analysis_levels(prefix, tmp_out / "report")
    assert list(rows) == [p["level"] for p in probes]
    for probe in judged:
        assert rows[probe["level"]]["verdict"].split(" ")[0] == probe["verdict"], probe["level"]
        assert rows[probe["level"]]["achieved_qps"] == pytest.approx(probe["achieved_qps"], abs=1e-9)


@pytest.mark.slow
def test_capacity_search_without_gates_is_refused_in_one_line():
    result = run_locust(
        "-f", "locustfile.py,shapes/capacity.py", "--headless", "--etcd-user-rate", "10", "EtcdPutUser", timeout=60
    )  # fmt: skip
    assert refusal_line(result) == (
        "locust-etcd: error: --etcd-sla: CapacitySearchShape judges each probe by the gates; give some, "
        "for example --etcd-sla 'put:p99<15ms'"
    )
    assert "started a local etcd" not in result.stderr  # refused before anything starts


@pytest.mark.slow
def test_the_web_uis_sla_tab_shows_each_level_judged_so_far(etcd1, tmp_out):
    from e2e.test_webui import extended, web_ui

    def level_rows(stats: dict) -> list[dict]:
        return [row for row in extended(stats, "etcd-sla") if row["name"].startswith("level '")]

    prefix = tmp_out / "ui-steps"
    args = (
        "-f", "locustfile.py,shapes/step_spike.py", "--autostart", "EtcdPutUser", "--csv", str(prefix),
        "--etcd-endpoints", ",".join(etcd1.endpoints), "--etcd-prefix", "/live-levels-ui/", "--etcd-cleanup",
        *STEPS, "--etcd-sla", GATES,
    )  # fmt: skip
    record_path = tmp_out / "ui-steps_shape.json"

    def decided() -> list[dict] | None:
        """The record's levels once the run has decided each: the plan ended, and every level whose users were all
        running judged, its log line written (a level whose users never all ran, on a busy machine, has no verdict)."""
        if not record_path.is_file():
            return None
        record = json.loads(record_path.read_text())
        if record["ended_at"] is None:
            return None
        levels = record["levels"]
        logged = [line.split("'")[1] for line in level_lines(ui.process.output()[1])]
        return levels if logged == [level["name"] for level in levels if level["running_at"] is not None] else None

    with web_ui(tmp_out, *args) as ui:
        # the plan, twice over for a busy machine, and half a minute to start
        ui.wait_for(lambda stats: stats["state"] == "stopped", "the shape's end", timeout=2 * STEPS_PLAN_S + 30)
        deadline = time.monotonic() + STEPS_PLAN_S + 2 * WAIT_S  # a verdict waits WAIT_S at most for its data
        while (levels := decided()) is None:
            assert time.monotonic() < deadline, f"the run did not judge its levels\n{ui.process.output()[1][-3000:]}"
            time.sleep(0.5)
        judged = {level["name"]: level for level in levels if level["verdict"] is not None}
        print("\n".join(f"{level['name']}: {level['verdict']} running at {level['running_at']}" for level in levels))
        ended = ui.wait_for(lambda stats: len(level_rows(stats)) == len(judged), "the judged levels' verdicts")
        gates = [row for row in extended(ended, "etcd-sla") if not row["name"].startswith("level '")]
        # the run's gates on everything so far
        assert [row["name"] for row in gates] == ["put p99 < 2s", f"put qps < {QPS_LIMIT:g}"]
        planned = {"baseline": 50, "step 1": 250, "step 2": 450}
        assert [(level["name"], level["qps"]) for level in levels] == list(planned.items())
        shown = level_rows(ended)
        assert [row["name"] for row in shown] == [f"level '{name}' at {planned[name]} QPS" for name in judged]
        for row, (name, level) in zip(shown, judged.items(), strict=True):
            # the verdict shown is the run's, and the rules' on the figures shown; a step fails on any machine
            qps = planned[name]
            assert row["verdict"] == level["verdict"], (row, level)
            passes = [shown_check_passes(part, qps) for part in row["measured"].split("; ")]
            assert len(passes) == 3, row
            assert row["verdict"] == ("pass" if all(passes) else "FAIL"), row
            assert qps == 50 or row["verdict"] == "FAIL", row
        # whether the whole run passed its QPS gate depends on the machine: the exit code says what the tab said
        ui.process.terminate()
        finished = ui.process.finish(timeout=60)
    failed = [row["name"] for row in gates if row["verdict"] == "FAIL"]
    assert finished.returncode == (3 if failed else 0), finished.stderr[-3000:]
    if failed:
        assert f"SLA: {len(failed)} of {len(gates)} gates failed" in finished.stderr


def shown_check_passes(line: str, planned_qps: float) -> bool:
    """Whether a check line as shown (``put p99 0.004s < 2s``, ``put qps 48.0/s < 200``, ``achieved 48.0 QPS >= 95%
    of planned 50``) passes by its rule on the figure it shows, after checking its relation sign says the same."""
    keep_up = re.fullmatch(r"achieved ([0-9.]+) QPS (>=|<) 95% of planned ([0-9.]+)", line)
    if keep_up:
        figure, relation, limit = float(keep_up[1]), keep_up[2], KEEP_UP * float(keep_up[3])
        assert float(keep_up[3]) == planned_qps, line
        if abs(figure - limit) > 0.05:  # the figure is shown rounded to 0.1
            assert relation == (">=" if figure >= limit else "<"), line
        return relation == ">="
    gate = re.fullmatch(r"put (p99|qps) ([0-9.]+)(?:s|/s) ([<>=]) ([0-9.]+)s?", line)
    assert gate, line
    figure, relation, limit = float(gate[2]), gate[3], float(gate[4])
    assert limit == (2 if gate[1] == "p99" else QPS_LIMIT), line
    if abs(figure - limit) > 0.05:
        assert relation == ("<" if figure < limit else ">"), line
    return relation == "<"
