"""Is it etcd or the load generator? The client CPU's rules (analysis.client), the per-level flags and advice
(analysis.levels, python -m analysis), and the master's side of the samples (etcd_users.latency.client_cpu), on
hand-made runs whose answers are known.

The run (T0 = 1700000000, rate-driven put users at 10/s each, gate put:p99<20ms judged on the service time):

    level    planned  running  seconds     put/s  service  intended  busiest client (CPU + run-queue wait)  bound
    quiet    100 QPS  +0.5     1, 2, 3     100    1 ms     1 ms      local 30 %                              -
    busy     200 QPS  +4.5     5, 6, 7     150    1 ms     1 ms      local 60 % + 35 % waiting               client
    behind   300 QPS  +8.5     9, 10, 11   300    2 ms     50 ms     local 40 %                              schedule
    slow     400 QPS  +12.5    13, 14, 15  200    30 ms    60 ms     local 50 %                              server

The seconds between levels (0, 4, 8, 12) have the local process at 100 %: no level may count them.
"""

from __future__ import annotations

import locust  # noqa: F401  (gevent patching first: the client CPU module imports Locust's runners)
from locust import runners as locust_runners

import json
import time
from pathlib import Path
from types import SimpleNamespace

import gevent
import pandas as pd
import pytest
from support import read_csv_rows
from support import run_analysis as cli

from etcd_users import hdr
from etcd_users.analysis import client, suite
from etcd_users.analysis.client import Busiest
from etcd_users.analysis.levels import FAIL, PASS, advice, json_document, measure_levels
from etcd_users.analysis.levels import notes as levels_notes
from etcd_users.analysis.levels import table as levels_table
from etcd_users.analysis.load import _read_csv_file, load_run
from etcd_users.analysis.measure import measure_run
from etcd_users.analysis.tables import comparison_table
from etcd_users.files import CLIENT_CPU_COLUMNS, INTENDED, LOCAL_PROCESS, MASTER_PROCESS, SERVICE
from etcd_users.latency import client_cpu
from etcd_users.latency.client_cpu import MAX_UNSENT, REPORT_KEY, ClientCpu, CpuSampler
from etcd_users.latency.store import SealedInterval, summary_row
from etcd_users.latency.writer import LatencyFiles

T0 = 1_700_000_000
GATE = "put:p99<20ms"
# name: (planned QPS, running_at, seconds, put per second, service us, intended us, client CPU %, wait %)
LEVELS = {
    "quiet": (100, 0.5, (1, 2, 3), 100, 1_000, 1_000, 30.0, 0.0),
    "busy": (200, 4.5, (5, 6, 7), 150, 1_000, 1_000, 60.0, 35.0),
    "behind": (300, 8.5, (9, 10, 11), 300, 2_000, 50_000, 40.0, 0.0),
    "slow": (400, 12.5, (13, 14, 15), 200, 30_000, 60_000, 50.0, 0.0),
}
BETWEEN = (0, 4, 8, 12)


def shape_record() -> dict:
    levels = []
    for name, (qps, running, *_rest) in LEVELS.items():
        started = running - 0.5
        levels.append(
            {"name": name, "users": qps // 10, "qps": float(qps), "spawn_rate": 100.0, "warmup": False}
            | {"started_at": T0 + started, "running_at": T0 + running, "errors": []}
        )
    return {"shape": "StepSpikeShape", "started_at": T0, "ended_at": T0 + 16.0, "sla": GATE, "levels": levels}


def write_run(prefix: Path, with_cpu: bool = True, cpu: dict[int, float] | None = None) -> str:
    """The exact files (service and intended series), the shape record and PREFIX_client_cpu.csv (``cpu``: the local
    process's CPU % by second since T0, instead of the table's)."""
    intervals, totals = [], {}
    for _name, (_qps, _running, seconds, per_second, service_us, intended_us, _cpu, _wait) in LEVELS.items():
        for second in seconds:
            for series, value_us in ((SERVICE, service_us), (INTENDED, intended_us)):
                histogram = hdr.new_histogram()
                histogram.record_value(value_us, per_second)
                intervals.append(SealedInterval(T0 + second, ("etcd", "put", series), histogram, 0))
                totals[series] = hdr.add(totals.get(series), histogram)
    intervals.sort(key=lambda interval: (interval.second, interval.key))
    files = LatencyFiles(str(prefix), T0)
    files.append(intervals)
    files.write_summary([summary_row(("etcd", "put", series), totals[series], 0) for series in totals], T0, T0 + 16)
    files.close()
    Path(f"{prefix}_shape.json").write_text(json.dumps(shape_record()))
    if with_cpu:
        lines = [",".join(CLIENT_CPU_COLUMNS)]
        for second in range(16):
            level = next((spec for spec in LEVELS.values() if second in spec[2]), None)
            used, wait = (level[6], level[7]) if level else (100.0, 0.0)
            used = (cpu or {}).get(second, used)
            lines.append(f"{T0 + second},{LOCAL_PROCESS},{used:.1f},{wait:.1f}")
            # a worker that is never busy: the busiest is the local process
            lines.append(f"{T0 + second},host_0123abcd,10.0,")
        Path(f"{prefix}_client_cpu.csv").write_text("\n".join(lines) + "\n")
    return str(prefix)


def levels_of(prefix: str):
    return measure_levels(measure_run(load_run(prefix)))


def by_level(result) -> dict[str, dict]:
    return {level.window.name: level.rows[0] for level in result.levels}


# --- the rules, pure -----------------------------------------------------------------------------------------------


def test_client_bound_is_cpu_plus_run_queue_wait_at_or_above_90_percent_of_a_core():
    assert client.CLIENT_BOUND_PCT == 90.0
    assert client.client_bound(Busiest("local", 90.0, None))
    assert not client.client_bound(Busiest("local", 89.9, None))
    # a process that got 55 % of a core and waited 40 % for more wanted a whole one: the machine had none to give
    assert client.client_bound(Busiest("local", 55.0, 40.0))
    assert not client.client_bound(Busiest("local", 55.0, 30.0))
    assert not client.client_bound(None)


def test_runaway_is_intended_p99_above_twice_the_service_p99():
    assert client.RUNAWAY_RATIO == 2.0
    assert client.ran_away(20.1, 10.0)
    assert not client.ran_away(20.0, 10.0)
    # twice the service time but only a few ms late: the event loop's jitter over sub-ms answers
    assert not client.ran_away(5.0, 2.0)
    assert client.ran_away(12.0, 2.0) and not client.ran_away(11.9, 2.0)
    assert not client.ran_away(None, 2.0) and not client.ran_away(5.0, None) and not client.ran_away(5.0, 0.0)


def test_bound_says_client_before_schedule_before_server():
    busy, idle = Busiest("w1", 95.0, None), Busiest("w1", 20.0, 1.0)
    assert client.bound(busy, runaway=True, service_within_gates=True, failed=True) == client.CLIENT
    assert client.bound(idle, runaway=True, service_within_gates=True, failed=True) == client.SCHEDULE
    # the service time broke a gate: etcd was slow, the intended time only followed it
    assert client.bound(idle, runaway=True, service_within_gates=False, failed=True) == client.SERVER
    assert client.bound(idle, runaway=False, service_within_gates=True, failed=False) == ""
    # without the clients' CPU nobody can say the server was the limit
    assert client.bound(None, runaway=False, service_within_gates=True, failed=True) == ""
    assert client.bound(None, runaway=True, service_within_gates=True, failed=False) == client.SCHEDULE


def test_busiest_is_the_process_with_the_highest_mean_demand_over_the_seconds():
    frame = pd.DataFrame(
        {
            "Timestamp": [10, 11, 12, 10, 11, 12, 13],
            "Process": ["master", "master", "master", "w1", "w1", "w1", "w1"],
            "CpuPct": [80.0, 80.0, 80.0, 50.0, 60.0, 70.0, 100.0],
            "WaitPct": [0.0, 0.0, 0.0, 30.0, 40.0, 50.0, 0.0],
        }
    )
    found = client.busiest(frame, range(10, 13))  # second 13 is outside
    assert found == Busiest("w1", 60.0, 40.0) and found.demand_pct == 100.0
    assert client.busiest(frame, range(20, 25)) is None
    without_wait = frame.drop(columns=["WaitPct"])  # a file from a system that does not say
    assert client.busiest(without_wait, range(10, 13)) == Busiest("master", 80.0, None)
    assert client.window_seconds(T0 + 0.5, T0 + 4.0) == range(T0 + 1, T0 + 4)


# --- per level ----------------------------------------------------------------------------------------------------


def test_levels_say_client_schedule_or_server_with_the_busiest_cpu_of_their_own_seconds(tmp_path: Path):
    result = levels_of(write_run(tmp_path / "run"))
    rows = by_level(result)
    assert {name: row["client_cpu_pct"] for name, row in rows.items()} == {
        "quiet": 30.0,
        "busy": 60.0,
        "behind": 40.0,
        "slow": 50.0,
    }
    assert {name: row["bound"] for name, row in rows.items()} == {
        "quiet": "",
        "busy": client.CLIENT,
        "behind": client.SCHEDULE,
        "slow": client.SERVER,
    }
    assert {name: row["verdict"] for name, row in rows.items()} == {
        "quiet": PASS,
        "busy": "FAIL (client-bound)",
        "behind": "pass (behind schedule)",
        "slow": FAIL,
    }
    # the keep-up rule says which side could not keep up
    assert rows["busy"]["breaches"] == (
        "achieved 150.0 QPS, 75.0 % of planned 200; client-bound: the local process at 60 % of a core "
        "(+35 % waiting for one)"
    )
    assert (
        "achieved 200.0 QPS, 50.0 % of planned 400; server: the busiest client, the local process at 50 %"
        in (rows["slow"]["breaches"])
    )
    assert "put p99 30 ms" in rows["slow"]["breaches"]
    # the machine-readable verdict stays pass/FAIL on the level, and the first breach names the client
    assert [level.verdict for level in result.levels] == [PASS, FAIL, PASS, FAIL]
    assert result.sentence() == (
        "capacity: 100 QPS (quiet) under put:p99<20ms and achieved QPS >= 95 % of planned; first breach at busy: "
        "achieved 150.0 QPS, 75.0 % of planned 200; client-bound: the local process at 60 % of a core "
        "(+35 % waiting for one) (client-bound: the load generator ran out of CPU, not etcd)"
    )
    assert advice([result]) == [client.ADVICE]
    frame = levels_table([result])
    assert list(frame.columns[frame.columns.get_loc("top_errors") + 1 :][:2]) == ["client_cpu_pct", "bound"]
    document = json_document([result], frame, levels_notes([result]))
    assert document["client_bound_levels"] == ["busy"]
    assert document["first_breach"]["bound"] == client.CLIENT and document["first_breach"]["level"] == "busy"
    assert [row["bound"] for row in document["runs"][0]["levels"]] == ["", "client", "schedule", "server"]
    assert client.LEVEL_NOTE in document["notes"]


def test_a_level_at_a_full_core_is_client_bound_whatever_its_verdict(tmp_path: Path):
    prefix = write_run(tmp_path / "run", cpu={second: 97.0 for second in (1, 2, 3)})
    rows = by_level(levels_of(prefix))
    assert rows["quiet"]["client_cpu_pct"] == 97.0
    assert rows["quiet"]["bound"] == client.CLIENT and rows["quiet"]["verdict"] == "pass (client-bound)"


def test_without_the_client_cpu_the_schedule_rule_still_speaks_and_no_level_is_called_server(tmp_path: Path):
    result = levels_of(write_run(tmp_path / "run", with_cpu=False))
    rows = by_level(result)
    assert {name: row["client_cpu_pct"] for name, row in rows.items()} == dict.fromkeys(LEVELS)
    assert {name: row["bound"] for name, row in rows.items()} == {
        "quiet": "",
        "busy": "",
        "behind": client.SCHEDULE,
        "slow": "",
    }
    assert advice([result]) == [client.SCHEDULE_ADVICE]


def test_cli_prints_the_advice_last_and_flags_client_bound_runs_in_the_comparison(tmp_path: Path):
    bound = write_run(tmp_path / "bound", cpu=dict.fromkeys(range(16), 96.0))
    spare = write_run(tmp_path / "spare")
    out = tmp_path / "report"
    result = cli(bound, spare, "--out", out)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("| run | name |") and lines[0].endswith("| client CPU (%) | bound |")
    assert any(line.startswith("| bound | put |") and line.endswith("| 96.0 | client |") for line in lines)
    # spare: the local process at 30-60 % in the levels, 100 % in the 4 seconds between them (0 to 15): 58.8 %
    assert any(line.startswith("| spare | put |") and line.endswith("| 58.8 |  |") for line in lines)
    assert lines[-1] == client.ADVICE
    assert lines.count(client.ADVICE) == 1
    levels_csv = read_csv_rows(out / "levels.csv")
    assert [(row["run"], row["level"], row["bound"]) for row in levels_csv][:2] == [
        ("bound", "quiet", "client"),
        ("bound", "busy", "client"),
    ]
    assert (out / "levels.md").read_text().rstrip().endswith(client.ADVICE)
    assert client.DEFINITIONS in (out / "comparison.md").read_text()


def test_comparison_without_any_client_cpu_file_is_unchanged(tmp_path: Path):
    measured = [measure_run(load_run(write_run(tmp_path / "old", with_cpu=False)))]
    table = comparison_table(measured)
    assert client.add_client_columns(table, measured) == (table, [], [])


# --- the samples on a master, a worker and a single process ---------------------------------------------------------


def environment(runner_class, prefix: str | None = None) -> SimpleNamespace:
    # isinstance is all the module asks of the runner (and Locust's __del__, its greenlet)
    runner = object.__new__(runner_class)
    runner.greenlet = None
    return SimpleNamespace(runner=runner, parsed_options=SimpleNamespace(csv_prefix=prefix))


def test_a_worker_ships_its_samples_once_and_keeps_at_most_max_unsent():
    worker = ClientCpu(environment(locust_runners.WorkerRunner, "ignored"))
    worker._on_sample((T0, 55.5, 2.0))
    worker._on_sample((T0 + 1, 60.0, None))
    data: dict = {}
    worker.on_report_to_master(data)
    assert data[REPORT_KEY] == [[T0, 55.5, 2.0], [T0 + 1, 60.0, None]]
    worker.on_report_to_master(data)
    assert data[REPORT_KEY] == []
    for second in range(MAX_UNSENT + 5):
        worker._on_sample((T0 + second, 1.0, 0.0))
    worker.on_report_to_master(data)
    assert len(data[REPORT_KEY]) == MAX_UNSENT and data[REPORT_KEY][0][0] == T0 + 5
    assert worker._client_cpu_file() is None  # workers write nothing


def test_the_master_writes_its_own_and_its_workers_rows_in_time_order(tmp_path: Path, monkeypatch):
    now = [T0 + 10.2]
    monkeypatch.setattr(client_cpu, "_now", lambda: now[0])
    prefix = str(tmp_path / "run")
    master = ClientCpu(environment(locust_runners.MasterRunner, prefix))
    master.on_test_start()
    master.sampler.stop()
    master.on_worker_report("w2", {REPORT_KEY: [[T0 + 3, 99.0, 1.0], [T0 + 8, 98.0, 0.0]]})
    master.on_worker_report("w1", {REPORT_KEY: [[T0 + 3, 20.0, None]]})
    master.on_worker_report("w1", {"stats": []})  # a report without samples (an older worker)
    master._on_sample((T0 + 3, 2.5, 0.0))  # writes what every worker had the time to report: seconds up to +4
    rows = read_csv_rows(f"{prefix}_client_cpu.csv")
    assert list(rows[0]) == list(CLIENT_CPU_COLUMNS)
    assert [(row["Process"], row["CpuPct"], row["WaitPct"]) for row in rows] == [
        (MASTER_PROCESS, "2.5", "0.0"),
        ("w1", "20.0", ""),
        ("w2", "99.0", "1.0"),
    ]
    master.on_quit()  # the rest, whatever its age
    rows = read_csv_rows(f"{prefix}_client_cpu.csv")
    assert [(int(row["Timestamp"]) - T0, row["Process"]) for row in rows][-1] == (8, "w2")
    found = client.busiest(load_run_cpu(prefix))
    assert found == Busiest("w2", 98.5, 0.5)


def load_run_cpu(prefix: str) -> pd.DataFrame:
    """The file as the analysis reads it (the file contract's required and text columns)."""
    return _read_csv_file(Path(f"{prefix}_client_cpu.csv"), "client_cpu")


def test_a_single_process_names_its_rows_local(tmp_path: Path):
    prefix = str(tmp_path / "run")
    single = ClientCpu(environment(locust_runners.LocalRunner, prefix))
    single._on_sample((int(time.time()) - 5, 12.0, None))
    assert [(row["Process"], row["CpuPct"]) for row in read_csv_rows(f"{prefix}_client_cpu.csv")] == [
        (LOCAL_PROCESS, "12.0")
    ]
    single.on_quit()


def test_the_sampler_takes_one_sample_a_second_on_whole_seconds_and_sees_a_busy_greenlet():
    samples: list = []
    sampler = CpuSampler(samples.append)
    sampler.start()
    try:
        deadline = time.monotonic() + 3.5
        while time.monotonic() < deadline:  # burn CPU in the hub's thread, yielding as Locust's users do
            until = time.process_time() + 0.002
            while time.process_time() < until:
                pass
            gevent.sleep(0)
    finally:
        sampler.stop()
    assert len(samples) >= 2, samples
    seconds = [second for second, _cpu, _wait in samples]
    assert seconds == list(range(seconds[0], seconds[0] + len(seconds)))
    # busy all along: the CPU it got plus what it waited for is about a core (the machine may be shared)
    assert all(cpu + (wait or 0.0) > 70.0 for _second, cpu, wait in samples), samples
    assert all(cpu < 150.0 for _second, cpu, _wait in samples), samples


@pytest.mark.parametrize(("cpu_seconds", "wall_seconds", "percent"), [(0.5, 1.0, 50.0), (1.2, 1.0, 120.0)])
def test_cpu_percent_is_of_one_core(cpu_seconds, wall_seconds, percent):
    assert client_cpu.cpu_percent(cpu_seconds, wall_seconds) == pytest.approx(percent)
    assert client_cpu.cpu_percent(1.0, 0.0) is None


def test_a_suite_names_its_client_bound_runs_in_the_notes(tmp_path: Path):
    notes: list[str] = []
    bound = load_run(write_run(tmp_path / "bound", cpu=dict.fromkeys(range(16), 96.0)), "sweep/c1-r1")
    spare = load_run(write_run(tmp_path / "spare"), "sweep/c1-r2")
    for run in (bound, spare):
        suite._measure(run, None, None, SERVICE, notes)
    assert notes == [
        "sweep/c1-r1: client-bound (the local process at 96 % of a core (+7 % waiting for one) over its measured "
        "window): its figures "
        "measure the load generator, not etcd; add --processes N or workers (--master / --worker)."
    ]
