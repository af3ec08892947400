"""``python -m analysis suite DIR``: mean ± standard deviation over a benchmark suite's repeats, against a suite
directory made by hand whose answers are known.

tests/fixtures/analysis_suite/ holds suite.yaml, the suite.json ``python -m etcd_users.suite run`` writes for it
(schema 1, state interrupted: 2 combinations × 3 repeats, axes users+conns and target) and the files of its
completed runs, 5 one-second intervals each:

- users=1_conns=1_target=leader, the tool's exact latency files (the .hlog is generated here from `EXACT`):
  rep1: 50 requests at 1.5 ms in the first second, then 100/s (85 × 0.5 ms, 13 × 1.0, 2 × 1.6): 450 requests
  over 5 s = 90/s; P50 0.5, P90 1.5, P99 1.6, P99.9 1.6 ms; no failures.
  rep2: 60 requests at 1.5 ms, then 110/s (90 × 0.5 ms, 17 × 1.0, 3 × 2.0) with 2 + 3 failures: 500 requests
  = 100/s; P50 0.5, P90 1.5, P99 2.0, P99.9 2.0 ms; 1 % errors.
  rep3: failed (no etcd endpoint answered).
- users=64_conns=8_target=leader, Locust's CSVs only (whole milliseconds):
  rep1: 1000/s for 5 s, 1 % failed; P50 3, P90 5, P99 9, P99.9 15 ms.
  rep2: 1100/s for 5 s, 2 % failed; P50 3, P90 6, P99 11, P99.9 20 ms.
  rep3: interrupted.
"""

from __future__ import annotations

import json
import shutil
import statistics
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pandas as pd
import pytest
from hdrh.histogram import HdrHistogram
from support import assert_one_line_error
from support import run_analysis as cli

from etcd_users.analysis.hlog import merge, merge_intervals
from etcd_users.analysis.load import AnalysisError
from etcd_users.analysis.suite import measure_suite
from etcd_users.files import SUITE_RUNNING
from etcd_users.suite.execute import Signals, SuiteRunner
from etcd_users.suite.loader import load_suite

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "analysis_suite"
SMALL = REPO / "tests" / "fixtures" / "suites" / "small.yaml"
EXACT_ID = "users=1_conns=1_target=leader"
LOCUST_ID = "users=64_conns=8_target=leader"
AXES = ["users", "conns", "target"]

# Per repeat of the exact combination: its start, then per second ({latency in µs: successful requests}, failures).
# Failed requests have no latency, as etcd_users.latency records them.
_STEADY_1 = {500: 85, 1000: 13, 1600: 2}
EXACT = {
    1: (1_700_000_000, [({1500: 50}, 0)] + [(_STEADY_1, 0)] * 4),
    2: (
        1_700_000_100,
        [
            ({1500: 60}, 0),
            ({500: 90, 1000: 17, 2000: 3}, 0),
            ({500: 88, 1000: 17, 2000: 3}, 2),
            ({500: 87, 1000: 17, 2000: 3}, 3),
            ({500: 90, 1000: 17, 2000: 3}, 0),
        ],
    ),
}

# Each completed run's figures, as the comparison table gives them (see the module docstring).
PER_RUN = {
    EXACT_ID: {
        "QPS": [90.0, 100.0],
        "P50 (ms)": [0.5, 0.5],
        "P90 (ms)": [1.5, 1.5],
        "P99 (ms)": [1.6, 2.0],
        "P99.9 (ms)": [1.6, 2.0],
        "error %": [0.0, 1.0],
    },
    LOCUST_ID: {
        "QPS": [1000.0, 1100.0],
        "P50 (ms)": [3.0, 3.0],
        "P90 (ms)": [5.0, 6.0],
        "P99 (ms)": [9.0, 11.0],
        "P99.9 (ms)": [15.0, 20.0],
        "error %": [1.0, 2.0],
    },
}
SPREAD = {"QPS": "QPS ±", "error %": "error % ±"}
HEADER = "| users | conns | target | name | QPS | P50 (ms) | P90 (ms) | P99 (ms) | P99.9 (ms) | error % | n | source |"
EXACT_LINE = (
    "| 1 | 1 | leader | put | 95.0 ± 7.1 | 0.500 ± 0.000 | 1.500 ± 0.000 | 1.800 ± 0.283 | 1.800 ± 0.283 "
    "| 0.50 ± 0.71 | 2 | exact |"
)
LOCUST_LINE = (
    "| 64 | 8 | leader | put | 1050.0 ± 70.7 | 3.000 ± 0.000 | 5.500 ± 0.707 | 10.000 ± 1.414 | 17.500 ± 3.536 "
    "| 1.50 ± 0.71 | 2 | locust |"
)
FAILED_NOTE = (
    "- users=1 conns=1 target=leader rep 3: failed, left out (locust exited with code 2: locust-etcd: error: "
    "no etcd endpoint answered within 5 s: http://127.0.0.1:40123 (UNAVAILABLE))."
)
INTERRUPTED_NOTE = "- interrupted, left out: users=64 conns=8 target=leader rep 3."
FILES = ["suite.md", "suite.csv", "suite_runs.csv", "suite.html", "suite_bars.png", "suite_bars.svg"]


def spread_column(column: str) -> str:
    return SPREAD.get(column, column.replace(" (ms)", "") + " ±")


def write_hlog(path: Path, start: int, seconds: list[tuple[dict[int, int], int]]) -> None:
    """An HdrHistogram interval log as etcd_users.latency writes it: one interval per second, microseconds."""
    lines = [
        "#[Histogram log format version 1.3]",
        f"#[StartTime: {start:.3f} (seconds since epoch), {start}]",
        f"#[BaseTime: {start:.3f} (seconds since epoch)]",
        "#Values are latencies in microseconds, Interval_Max in milliseconds.",
        '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"',
    ]
    for second, (values, _) in enumerate(seconds):
        histogram = HdrHistogram(1, 3_600_000_000, 3)
        for value_us, count in values.items():
            histogram.record_value(value_us, count)
        max_ms = histogram.get_max_value() / 1000
        lines.append(f"Tag=etcd:put:service,{second:.3f},1.000,{max_ms:.3f},{histogram.encode().decode()}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    """A copy of the fixture with the exact runs' .hlog generated beside their CSVs."""
    directory = tmp_path / "suite"
    shutil.copytree(FIXTURE, directory)
    for repeat, (start, seconds) in EXACT.items():
        write_hlog(directory / EXACT_ID / f"rep{repeat}_latency.hlog", start, seconds)
    return directory


def edit_suite_json(directory: Path, status: dict[str, str]) -> None:
    """Set the status of runs given by prefix, as the runner would have recorded them."""
    path = directory / "suite.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    for combination in document["combinations"]:
        for run in combination["runs"]:
            if run["prefix"] in status:
                run["status"] = status[run["prefix"]]
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")


# --- the fixture itself -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("repeat", [1, 2])
def test_fixture_latency_files_agree_with_the_hlog(suite_dir: Path, repeat: int) -> None:
    prefix = suite_dir / EXACT_ID / f"rep{repeat}"
    latency = pd.read_csv(f"{prefix}_latency.csv", keep_default_na=False)
    history = pd.read_csv(f"{prefix}_latency_history.csv")
    expected = latency[latency["Name"] == "put"].iloc[0]
    histogram = merge(list(merge_intervals(Path(f"{prefix}_latency.hlog")).values()))
    _, seconds = EXACT[repeat]
    assert histogram.get_total_count() == expected["Count"] - expected["Failures"]
    assert expected["Failures"] == sum(failures for _, failures in seconds) == history["Failures"].sum()
    assert history["Requests"].sum() == expected["Count"]
    for percent, column in ((50, "P50"), (90, "P90"), (99, "P99"), (99.9, "P99.9")):
        assert histogram.get_value_at_percentile(percent) / 1000 == expected[column]
        assert expected[column] == PER_RUN[EXACT_ID][f"{column} (ms)"][repeat - 1]


def test_fixture_suite_json_has_the_runners_layout(tmp_path: Path) -> None:
    """The hand-made suite.json has every key the runner writes for the same suite file, and the same plan."""
    out = tmp_path / "written"
    # The runner's own writer, as `run` calls it before the first run (every run pending)
    runner = SuiteRunner(load_suite(FIXTURE / "suite.yaml"), out, Signals())
    runner.prepare()
    runner._write_json(SUITE_RUNNING)
    written = json.loads((out / "suite.json").read_text(encoding="utf-8"))
    fixture = json.loads((FIXTURE / "suite.json").read_text(encoding="utf-8"))

    assert fixture.keys() == written.keys()
    same = ("schema", "name", "description", "quick", "duration", "repeats", "endpoints", "etcd_args", "fixed")
    assert {key: fixture[key] for key in same} == {key: written[key] for key in same}
    assert (
        fixture["axes"]
        == written["axes"]
        == [
            {"name": "users+conns", "parts": ["users", "conns"]},
            {"name": "target", "parts": ["target"]},
        ]
    )
    assert fixture["axis_names"] == written["axis_names"] == AXES
    assert len(fixture["combinations"]) == len(written["combinations"]) == 2
    for ours, theirs in zip(fixture["combinations"], written["combinations"], strict=True):
        assert ours.keys() == theirs.keys()
        plan = ("id", "label", "values", "users", "spawn_rate", "user_class", "members")
        assert {key: ours[key] for key in plan} == {key: theirs[key] for key in plan}
        assert ours["options"].items() <= theirs["options"].items()
        for our_run, their_run in zip(ours["runs"], theirs["runs"], strict=True):
            assert our_run.keys() == their_run.keys()
            assert (our_run["repeat"], our_run["prefix"]) == (their_run["repeat"], their_run["prefix"])
    assert [combination["id"] for combination in fixture["combinations"]] == [EXACT_ID, LOCUST_ID]

    # Written before any run finished: nothing to analyse, said in one line.
    assert_one_line_error(cli("suite", out), "no completed run to analyse", "(6 pending)")


# --- the table ----------------------------------------------------------------------------------------------------


def test_means_and_sample_stddevs_over_the_completed_repeats(suite_dir: Path) -> None:
    suite = measure_suite(suite_dir)
    table = suite.table
    assert list(table.columns[:4]) == [*AXES, "name"]
    assert list(table[AXES].itertuples(index=False, name=None)) == [(1, 1, "leader"), (64, 8, "leader")]
    assert list(table["name"]) == ["put", "put"]
    assert list(table["n"]) == [2, 2]
    assert list(table["source"]) == ["exact", "locust"]
    for index, combination in enumerate((EXACT_ID, LOCUST_ID)):
        row = table.iloc[index]
        for column, values in PER_RUN[combination].items():
            assert row[column] == pytest.approx(statistics.mean(values), rel=1e-12), (combination, column)
            # sample stddev (n - 1): two repeats a, b give |a - b| / sqrt(2)
            assert row[spread_column(column)] == pytest.approx(statistics.stdev(values), rel=1e-12, abs=1e-12)
    assert table.iloc[0]["QPS"] == 95.0
    assert table.iloc[1]["P99.9 (ms)"] == 17.5
    # every completed run, with its own figures
    runs = suite.runs
    assert list(runs["run"]) == [f"{EXACT_ID}/rep1", f"{EXACT_ID}/rep2", f"{LOCUST_ID}/rep1", f"{LOCUST_ID}/rep2"]
    assert list(runs["repeat"]) == [1, 2, 1, 2]
    assert list(runs["QPS"]) == [90.0, 100.0, 1000.0, 1100.0]


def test_cli_prints_the_table_and_notes_and_writes_every_file(suite_dir: Path) -> None:
    result = cli("suite", suite_dir)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "Warning" not in result.stderr
    lines = result.stdout.splitlines()
    assert lines[:4] == [HEADER, "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|", EXACT_LINE, LOCUST_LINE]
    assert lines[5:] == [
        "Notes:",
        "- suite state: interrupted (suite.json written 2023-11-14T22:16:40+00:00).",
        FAILED_NOTE,
        INTERRUPTED_NOTE,
    ]
    out = suite_dir / "analysis"
    assert result.stderr.strip() == f"wrote {', '.join(FILES)} to {out}"
    for name in FILES:
        assert (out / name).stat().st_size > 0, name

    csv = pd.read_csv(out / "suite.csv")
    assert list(csv.columns) == [
        *AXES,
        "name",
        "QPS",
        "QPS ±",
        "P50 (ms)",
        "P50 ±",
        "P90 (ms)",
        "P90 ±",
        "P99 (ms)",
        "P99 ±",
        "P99.9 (ms)",
        "P99.9 ±",
        "error %",
        "error % ±",
        "n",
        "source",
    ]
    exact, locust = csv.iloc[0], csv.iloc[1]
    assert (exact["users"], exact["conns"], exact["target"], exact["n"]) == (1, 1, "leader", 2)
    assert (exact["QPS"], exact["QPS ±"], exact["P99 (ms)"], exact["P99 ±"]) == (95.0, 7.071, 1.8, 0.2828)
    assert (locust["QPS"], locust["QPS ±"], locust["P90 (ms)"], locust["P90 ±"]) == (1050.0, 70.711, 5.5, 0.7071)
    assert (locust["P99.9 (ms)"], locust["P99.9 ±"], locust["error %"], locust["error % ±"]) == (
        17.5,
        3.5355,
        1.5,
        0.7071,
    )
    runs = pd.read_csv(out / "suite_runs.csv")
    assert list(runs["QPS"]) == [90.0, 100.0, 1000.0, 1100.0]
    assert list(runs["P99 (ms)"]) == [1.6, 2.0, 9.0, 11.0]

    markdown = (out / "suite.md").read_text(encoding="utf-8")
    assert markdown.startswith(
        "# etcd benchmark suite analysis-fixture\n\nWrites to the leader, 1 client vs 64 clients"
    )
    assert "Axes: users+conns, target." in markdown and "fixed key-size=64, val-size=256" in markdown
    assert f"{HEADER}\n" in markdown and f"{EXACT_LINE}\n{LOCUST_LINE}\n" in markdown and FAILED_NOTE in markdown


def test_chart_and_html_page(suite_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "elsewhere"
    result = cli("suite", suite_dir, "--out", out)
    assert result.returncode == 0, result.stderr
    assert not (suite_dir / "analysis").exists()
    assert (out / "suite_bars.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    root = ElementTree.parse(out / "suite_bars.svg").getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert len(list(root.iter())) > 50  # axes, bars, error bars and text were drawn
    svg = (out / "suite_bars.svg").read_text(encoding="utf-8")
    for text in ("users=1 conns=1", "users=64 conns=8", "target=leader", "1,050", "10.00"):
        assert text in svg, text

    page = (out / "suite.html").read_text(encoding="utf-8")
    assert "http://" not in page.replace("http://127.0.0.1:40123", "") and "https://" not in page
    assert "<script" not in page and "<link" not in page and "<img" not in page
    assert page.count("<svg") == 1
    assert (
        '<td class="num">1</td><td class="num">1</td><td>leader</td><td>put</td><td class="num">95.0 ± 7.1</td>' in page
    )
    assert "rep 3: failed, left out" in page


def test_warmup_cut_measures_each_run_after_it(suite_dir: Path) -> None:
    suite = measure_suite(suite_dir, warmup=1.0)
    exact = suite.table.iloc[0]
    # The first second is gone: 400 and 440 requests over 4 s, P90 from the .hlog after the cut.
    assert exact["QPS"] == 105.0
    assert exact["QPS ±"] == pytest.approx(statistics.stdev([100.0, 110.0]), rel=1e-12)
    assert (exact["P50 (ms)"], exact["P90 (ms)"], exact["P90 ±"]) == (0.5, 1.0, 0.0)
    assert exact["P99 (ms)"] == pytest.approx(1.8, rel=1e-12)
    assert exact["error %"] == pytest.approx(statistics.mean([0.0, 500 / 440]), rel=1e-12)
    assert exact["error % ±"] == pytest.approx(statistics.stdev([0.0, 500 / 440]), rel=1e-12)
    assert suite.notes[0] == "the first 1 s of each run cut before measuring."
    # Locust's CSVs without per-name history cannot be cut: said once per run, figures of the whole run.
    locust = suite.table.iloc[1]
    assert (locust["QPS"], locust["P99 (ms)"]) == (1050.0, 10.0)
    assert any(
        note.startswith(f"{LOCUST_ID}/rep1: requests and QPS per name cover the whole run") for note in suite.notes
    )


def test_one_repeat_has_no_stddev_and_unreadable_runs_are_left_out(suite_dir: Path) -> None:
    # rep2 of the exact combination failed; rep3 of the other is recorded done but its files are gone.
    edit_suite_json(suite_dir, {f"{EXACT_ID}/rep2": "failed", f"{LOCUST_ID}/rep3": "done"})
    result = cli("suite", suite_dir, "--metrics", "qps,p99,error")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "| users | conns | target | name | QPS | P99 (ms) | error % | n | source |"
    assert lines[2] == "| 1 | 1 | leader | put | 90.0 ± — | 1.600 ± — | 0.00 ± — | 1 | exact |"
    assert lines[3] == "| 64 | 8 | leader | put | 1050.0 ± 70.7 | 10.000 ± 1.414 | 1.50 ± 0.71 | 2 | locust |"
    assert "- users=1 conns=1 target=leader rep 2: failed, left out (no reason recorded)." in lines
    missing = suite_dir / LOCUST_ID / "rep3"
    assert any(
        line.startswith(f"- users=64 conns=8 target=leader rep 3: left out (no run found at prefix '{missing}'")
        for line in lines
    )
    csv = pd.read_csv(suite_dir / "analysis" / "suite.csv")
    assert list(csv.columns) == [
        *AXES,
        "name",
        "QPS",
        "QPS ±",
        "P99 (ms)",
        "P99 ±",
        "error %",
        "error % ±",
        "n",
        "source",
    ]
    assert csv.iloc[0]["QPS"] == 90.0 and pd.isna(csv.iloc[0]["QPS ±"]) and pd.isna(csv.iloc[0]["P99 ±"])


def test_names_filter(suite_dir: Path) -> None:
    result = cli("suite", suite_dir, "--names", "put,range/serializable", "--metrics", "qps")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[2] == "| 1 | 1 | leader | put | 95.0 ± 7.1 | 2 | exact |"
    assert_one_line_error(cli("suite", suite_dir, "--names", "watch"), "none of the suite's runs", "named watch")


# --- one-line errors ----------------------------------------------------------------------------------------------


def test_errors_are_one_line(suite_dir: Path, tmp_path: Path) -> None:
    assert_one_line_error(cli("suite", tmp_path / "nope"), f"suite directory {tmp_path / 'nope'} does not exist")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_one_line_error(cli("suite", empty), f"no suite.json in {empty}", "python -m etcd_users.suite run")
    assert_one_line_error(cli("suite", suite_dir / EXACT_ID / "rep1_stats.csv"), "is not a directory")

    other = tmp_path / "other"
    other.mkdir()
    document = other / "suite.json"
    document.write_text('{"started_at": 1700000000, "levels": []}', encoding="utf-8")
    assert_one_line_error(cli("suite", other), f"{document} was not written by python -m etcd_users.suite run")
    document.write_text("[1, 2]", encoding="utf-8")
    assert_one_line_error(cli("suite", other), "was not written by python -m etcd_users.suite run: no schema key")
    document.write_text('{"schema": 2, "combinations": []}', encoding="utf-8")
    assert_one_line_error(cli("suite", other), "has schema 2; this analysis reads schema 1")
    document.write_text('{"schema": 1, "name": "x", "axes": [], "axis_names": []}', encoding="utf-8")
    assert_one_line_error(cli("suite", other), "no combinations")
    document.write_text("{not json", encoding="utf-8")
    assert_one_line_error(cli("suite", other), "is not valid JSON")

    # The only completed run left has lost its files.
    edit_suite_json(suite_dir, {f"{EXACT_ID}/rep{k}": "pending" for k in (1, 2)} | {f"{LOCUST_ID}/rep1": "failed"})
    (suite_dir / LOCUST_ID / "rep2_stats.csv").unlink()
    assert_one_line_error(
        cli("suite", suite_dir / "suite.json"), "none of the completed runs", "could be read: no run found at prefix"
    )
    edit_suite_json(suite_dir, {f"{LOCUST_ID}/rep2": "interrupted"})
    assert_one_line_error(
        cli("suite", suite_dir), "no completed run to analyse", "(2 pending, 2 failed, 2 interrupted)"
    )
    with pytest.raises(AnalysisError, match="no completed run"):
        measure_suite(suite_dir)

    assert_one_line_error(
        cli("suite", FIXTURE, "--metrics", "qps,p95"), "--metrics: unknown p95; known: qps, p50, p90, p99, p99.9, error"
    )


def test_one_value_of_a_suite_axis_is_a_side_whose_cells_are_named_by_the_other_axes(suite_dir: Path) -> None:
    from etcd_users.analysis.compare import load_side
    from etcd_users.analysis.load import AnalysisError

    side = load_side(f"{suite_dir}:users=64", "candidate")
    assert side.suite and list(side.cells) == ["conns=8 target=leader"]
    runs = side.cells["conns=8 target=leader"]
    assert runs and all(run.label.startswith("users=64_conns=8_target=leader/rep") for run in runs)
    with pytest.raises(AnalysisError, match=r"no combination has users=2 \(its values: 1, 64\)"):
        load_side(f"{suite_dir}:users=2", "baseline")
    with pytest.raises(AnalysisError, match=r"the suite has no axis 'members'"):
        load_side(f"{suite_dir}:members=3", "baseline")
