"""The analysis package against small hand-made runs whose answers are known.

Fixtures in tests/fixtures/analysis/ (T0 = 1700000000, 10 one-second intervals):

- one_member: put 500/s at 1.8 ms for 2 warm-up seconds, then 1000/s (900 x 1.0 ms, 90 x 1.5, 9 x 1.9, 1 x 2.0),
  9 failures; range/serializable 2000/s (1980 x 0.4 ms, 18 x 0.7, 2 x 1.3); shape.json with warmup_end = T0+2.
- three_members: put 400/s (360 x 2.801 ms, 36 x 3.501, 4 x 4.001), 8 failures; range/serializable 1800/s
  (1782 x 0.5 ms, 16 x 0.9, 2 x 1.5); no shape.json.
- locust_only: Locust's CSVs only (no --csv-full-history), 1800 requests/s for 10 s.
- locust_full: Locust's CSVs with --csv-full-history: put 500 requests in the first second, then 1000/s for 3 s.
- empty: Locust's CSVs of a run without requests; foreign: a JMeter CSV under a Locust name.

The .hlog files are generated here from the same per-second values (`write_hlog`).
"""

from __future__ import annotations

import json
import shutil
import statistics
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hdrh.histogram import HdrHistogram
from support import assert_one_line_error
from support import run_analysis as cli

from etcd_users.analysis.benchmark_report import summary
from etcd_users.analysis.distribution import HdrDistribution
from etcd_users.analysis.hlog import HlogKey, merge, merge_intervals
from etcd_users.analysis.load import AnalysisError, load_run
from etcd_users.analysis.measure import measure_run
from etcd_users.analysis.skew import run_distribution
from etcd_users.analysis.tables import comparison_table, errors_table
from etcd_users.files import SUMMARY_SCHEMA_VERSION
from etcd_users.hdr import histogram_of
from etcd_users.workload_model.distributions import parse_key_distribution

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "analysis"
T0 = 1_700_000_000
SECONDS = range(10)

# Per request name: per second (offset from T0): {latency in microseconds: count of successful requests}.
# Failed requests have no latency: a second with failures records that many fewer samples (put, one_member: 5
# failures at T0+5 and 4 at T0+8; three_members: 2 at T0+3 and 6 at T0+7), as etcd_users.latency does.
ONE_MEMBER = {
    "put": {
        s: {1800: 500} if s < 2 else {1000: 900 - {5: 5, 8: 4}.get(s, 0), 1500: 90, 1900: 9, 2000: 1} for s in SECONDS
    },
    "range/serializable": {s: {400: 1980, 700: 18, 1300: 2} for s in SECONDS},
}
THREE_MEMBERS = {
    "put": {s: {2801: 360 - {3: 2, 7: 6}.get(s, 0), 3501: 36, 4001: 4} for s in SECONDS},
    "range/serializable": {s: {500: 1782, 900: 16, 1500: 2} for s in SECONDS},
}
SPECS = {"one_member": ONE_MEMBER, "three_members": THREE_MEMBERS}


def write_hlog(path: Path, spec: dict, start: int = T0, absolute: bool = False) -> None:
    """Write an HdrHistogram interval log as etcd_users.latency does: one tagged interval per second and key,
    values in microseconds, timestamps from a StartTime/BaseTime header (``absolute``: unix times, no header)."""
    lines = ["#[Histogram log format version 1.3]"]
    if not absolute:
        lines += [
            f"#[StartTime: {start:.3f} (seconds since epoch), {start}]",
            f"#[BaseTime: {start:.3f} (seconds since epoch)]",
        ]
    lines += [
        "#Values are latencies in microseconds, Interval_Max in milliseconds.",
        '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"',
    ]
    for second in SECONDS:
        for name, per_second in spec.items():
            histogram = HdrHistogram(1, 3_600_000_000, 3)
            for value_us, count in per_second[second].items():
                histogram.record_value(value_us, count)
            timestamp = start + second if absolute else second
            payload = histogram.encode().decode()
            max_ms = histogram.get_max_value() / 1000
            lines.append(f"Tag=etcd:{name}:service,{timestamp:.3f},1.000,{max_ms:.3f},{payload}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """A copy of the fixtures with the .hlog of the exact runs generated beside them."""
    directory = tmp_path / "runs"
    shutil.copytree(FIXTURES, directory)
    for prefix, spec in SPECS.items():
        write_hlog(directory / f"{prefix}_latency.hlog", spec)
    return directory


def expand(spec: dict, names: list[str], seconds: range = SECONDS) -> list[int]:
    """Every sample of the spec, for computing expectations the slow, obvious way."""
    return [value for name in names for s in seconds for value, count in spec[name][s].items() for _ in range(count)]


def compare(runs_dir: Path, *prefixes: str, **options) -> pd.DataFrame:
    measured = [measure_run(load_run(str(runs_dir / prefix)), **options) for prefix in prefixes]
    return comparison_table(measured, baseline=prefixes[0])


def row(table: pd.DataFrame, run: str, name: str) -> pd.Series:
    match = table[(table["run"] == run) & (table["name"] == name)]
    assert len(match) == 1, f"no single row for {run} {name}"
    return match.iloc[0]


# --- the fixtures themselves -------------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["one_member", "three_members"])
def test_fixture_latency_csv_agrees_with_its_hlog(runs: Path, prefix: str) -> None:
    latency = pd.read_csv(runs / f"{prefix}_latency.csv", keep_default_na=False)
    merged = merge_intervals(runs / f"{prefix}_latency.hlog")
    for name in SPECS[prefix]:
        histogram = merge([h for key, h in merged.items() if key.name == name])
        expected = latency[latency["Name"] == name].iloc[0]
        assert histogram.get_total_count() == expected["Count"] - expected["Failures"]
        assert histogram.get_max_value() / 1000 == expected["Max"]
        for percent, column in ((50, "P50"), (90, "P90"), (99, "P99"), (99.9, "P99.9")):
            assert histogram.get_value_at_percentile(percent) / 1000 == expected[column]


# --- comparison table ---------------------------------------------------------------------------------------------


def test_qps_uses_the_exact_first_and_last_request_when_the_latency_csv_has_them(runs: Path) -> None:
    # the run began 0.75 s into its first history second and ended 0.25 s into its last: 8.5 s, not 10 s
    latency_csv = runs / "one_member_latency.csv"
    frame = pd.read_csv(latency_csv)
    frame["First"], frame["Last"] = f"{T0 + 0.75:.3f}", f"{T0 + 9.25:.3f}"
    frame.to_csv(latency_csv, index=False)
    put = row(compare(runs, "one_member"), "one_member", "put")
    assert put["requests"] == 9000
    assert put["QPS"] == pytest.approx(9000 / 8.5)


def test_table_from_exact_files_over_the_whole_run(runs: Path) -> None:
    table = compare(runs, "one_member", "three_members")
    put = row(table, "one_member", "put")
    # 9000 requests over 10 s of history; percentiles from one_member_latency.csv.
    assert (put["requests"], put["failures"], put["source"]) == (9000, 9, "exact")
    assert put["QPS"] == 900.0
    assert (put["P50 (ms)"], put["P90 (ms)"], put["P99 (ms)"], put["P99.9 (ms)"], put["max (ms)"]) == (
        1.0,
        1.8,
        1.8,
        1.9,
        2.0,
    )
    assert put["avg (ms)"] == 1.137
    assert put["error %"] == pytest.approx(0.1)
    cluster = row(table, "three_members", "put")
    assert (cluster["QPS"], cluster["P99 (ms)"], cluster["P99.9 (ms)"]) == (400.0, 3.501, 4.001)
    assert cluster["error %"] == pytest.approx(0.2)
    # QPS % of baseline and latency multiples, as the single node vs 3-node benchmark chapter puts it.
    assert cluster["QPS % of baseline"] == pytest.approx(400 / 900 * 100)
    assert cluster["P99 ×"] == pytest.approx(3.501 / 1.8)
    assert cluster["avg ×"] == pytest.approx(2.876 / 1.137)
    assert row(table, "one_member", "Aggregated")["QPS"] == 2900.0


def test_warmup_cut_uses_hlog_intervals_and_history_after_the_cut(runs: Path) -> None:
    table = compare(runs, "one_member", "three_members", warmup=2.0)
    put = row(table, "one_member", "put")
    # The 2 warm-up seconds (1000 requests at 1.8 ms) are gone: 8000 requests over 8 s.
    assert (put["requests"], put["failures"], put["QPS"]) == (8000, 9, 1000.0)
    # 7991 successful samples: 7191 x 1.0 ms, 720 x 1.5, 72 x 1.9, 8 x 2.0.
    assert (put["P50 (ms)"], put["P90 (ms)"], put["P99 (ms)"], put["P99.9 (ms)"]) == (1.0, 1.5, 1.5, 1.9)
    assert put["avg (ms)"] == pytest.approx(8_423_800 / 7991 / 1000)
    assert put["error %"] == pytest.approx(0.1125)
    cluster = row(table, "three_members", "put")
    assert (cluster["requests"], cluster["failures"], cluster["QPS"]) == (3200, 8, 400.0)
    # 3 members: 40 % of the single member's write QPS, P99 x2.334, average x2.73.
    assert cluster["QPS % of baseline"] == pytest.approx(40.0)
    assert cluster["P99 ×"] == pytest.approx(3.501 / 1.5)
    assert cluster["P99.9 ×"] == pytest.approx(4.001 / 1.9)
    assert cluster["avg ×"] == pytest.approx((9_180_792 / 3192) / (8_423_800 / 7991))
    assert row(table, "three_members", "range/serializable")["QPS % of baseline"] == pytest.approx(90.0)


def test_warmup_from_the_shape_when_no_seconds_are_given(runs: Path) -> None:
    auto = measure_run(load_run(str(runs / "one_member")), warmup="auto")
    assert auto.cut_s == T0 + 2
    assert [m.requests for m in auto.measurements if m.name == "put"] == [8000]
    without_shape = measure_run(load_run(str(runs / "three_members")), warmup="auto")
    assert without_shape.cut_s is None
    assert any("no warm-up cut" in note for note in without_shape.notes)


def test_hlog_with_absolute_timestamps_gives_the_same_cut(runs: Path) -> None:
    write_hlog(runs / "one_member_latency.hlog", ONE_MEMBER, absolute=True)
    put = row(compare(runs, "one_member", warmup=2.0), "one_member", "put")
    assert (put["P99 (ms)"], put["requests"]) == (1.5, 8000)


def test_locust_only_run_falls_back_to_locust_figures(runs: Path) -> None:
    table = compare(runs, "locust_only")
    put = row(table, "locust_only", "put")
    assert put["source"] == "locust"
    # 6000 requests over the 10 s from the first to the last history interval with requests.
    assert (put["requests"], put["QPS"], put["P99 (ms)"], put["P99.9 (ms)"], put["error %"]) == (
        6000,
        600.0,
        11.0,
        23.0,
        1.0,
    )
    cut = measure_run(load_run(str(runs / "locust_only")), warmup=2.0)
    aggregated = next(m for m in cut.measurements if m.name == "Aggregated")
    assert (aggregated.requests, aggregated.failures, aggregated.qps) == (14400, 48, 1800.0)
    # Without per-name history the per-name counts cannot be cut, so they keep the whole run's duration.
    assert next(m for m in cut.measurements if m.name == "put").qps == 600.0
    assert any("percentiles and max include the warm-up" in note for note in cut.notes)


def test_locust_full_history_cuts_each_name(runs: Path) -> None:
    whole = measure_run(load_run(str(runs / "locust_full"))).measurements[0]
    assert (whole.name, whole.requests, whole.qps) == ("put", 3500, 875.0)
    cut = measure_run(load_run(str(runs / "locust_full")), warmup=1.0)
    put = cut.measurements[0]
    assert (put.requests, put.failures, put.qps, put.source) == (3000, 1, 1000.0, "locust")
    assert put.error_pct == pytest.approx(100 / 3000)
    assert cut.window.duration_s == 3.0


def test_hlog_tags() -> None:
    assert HlogKey.parse("etcd:range/linearizable:intended") == HlogKey("etcd", "range/linearizable", "intended")
    assert HlogKey.parse("etcd:put") == HlogKey("etcd", "put", "service")


@pytest.mark.parametrize("sigma", [0.3, 1.0, 2.5])
def test_hdr_distribution_agrees_with_hdrh(sigma: float) -> None:
    """The mean and percentiles from etcd_users.hdr (as the latency CSV has them) are hdrh's own figures."""
    rng = np.random.default_rng(int(sigma * 10))
    for size in (1, 7, 20_000):
        histogram = histogram_of(rng.lognormal(mean=1.0, sigma=sigma, size=size))
        distribution = HdrDistribution(histogram)
        percents = [0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99, 100.0]
        expected = {percent: histogram.get_value_at_percentile(percent) / 1000 for percent in percents}
        assert distribution.percentiles(percents) == expected
        assert histogram.get_percentile_to_value_dict(percents) == {p: v * 1000 for p, v in expected.items()}
        assert {percent: distribution.percentile(percent) for percent in percents} == expected
        assert distribution.percentile(100.0) == distribution.max_ms
        assert distribution.percentile(0.0) == distribution.min_ms
        assert distribution.mean_ms == histogram.get_mean_value() / 1000


def test_empty_hdr_distribution() -> None:
    distribution = HdrDistribution(histogram_of([]))
    assert (distribution.count, distribution.mean_ms) == (0, 0.0)
    assert distribution.percentile(50.0) is None
    assert distribution.percentiles([0.0, 99.0, 100.0]) == {0.0: None, 99.0: None, 100.0: None}


def test_names_filter_and_order(runs: Path) -> None:
    measured = measure_run(load_run(str(runs / "one_member")), names=["range/serializable", "put", "watch"])
    assert [m.name for m in measured.measurements] == ["range/serializable", "put"]
    assert any("no requests named 'watch'" in note for note in measured.notes)


# --- errors -------------------------------------------------------------------------------------------------------


def test_errors_table_by_label(runs: Path) -> None:
    table = errors_table([load_run(str(runs / "one_member")), load_run(str(runs / "locust_only"))])
    one = table[table["run"] == "one_member"]
    # Locust stored one failure as an exception repr; it is reported by its etcd label.
    assert list(one["error"]) == ["etcdserver: too many requests", "etcdserver: request timed out"]
    assert list(one["occurrences"]) == [5, 4]
    assert one["% of failures"].tolist() == pytest.approx([500 / 9, 400 / 9])
    assert one["% of requests"].tolist() == pytest.approx([500 / 29000, 400 / 29000])
    other = table[table["run"] == "locust_only"]
    assert dict(zip(other["error"], other["occurrences"], strict=True)) == {
        "etcdserver: too many requests": 45,
        "UNAVAILABLE": 10,
        "DEADLINE_EXCEEDED": 5,
    }


def test_errors_command(runs: Path) -> None:
    result = cli("errors", runs / "three_members", runs / "locust_only", "--labels", "3 members,locust")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "| run | error | occurrences | % of failures | % of requests | names |"
    assert "| 3 members | etcdserver: too many requests | 6 | 75.0 | 0.027 | put |" in lines
    assert "| 3 members | etcdserver: leader changed | 2 | 25.0 | 0.009 | put |" in lines
    assert "| locust | DEADLINE_EXCEEDED | 5 | 8.3 | 0.028 | put |" in lines


# --- etcd benchmark report ----------------------------------------------------------------------------------------


def test_summary_from_exact_files_has_the_go_layout(runs: Path) -> None:
    result = cli("summary", runs / "one_member", "--name", "put")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    samples = expand(ONE_MEMBER, ["put"])
    stddev = statistics.pstdev(samples) / 1e6
    expected = "\n".join(
        [
            "one_member put: exact, from one_member_latency.hlog; QPS from one_member_latency_history.csv",
            "",
            "Summary:",
            "  Total:\t10.0000 secs.",
            "  Slowest:\t0.0020 secs.",
            "  Fastest:\t0.0010 secs.",
            "  Average:\t0.0011 secs.",
            f"  Stddev:\t{stddev:4.4f} secs.",
            "  Requests/sec:\t899.1000",
            "",
            "Response time histogram:",
            "  0.0010 [7191]\t|" + "∎" * 40,
            "  0.0011 [0]\t|",
            "  0.0012 [0]\t|",
            "  0.0013 [0]\t|",
            "  0.0014 [0]\t|",
            "  0.0015 [720]\t|∎∎∎∎",
            "  0.0016 [0]\t|",
            "  0.0017 [0]\t|",
            "  0.0018 [1000]\t|∎∎∎∎∎",
            "  0.0019 [72]\t|",
            "  0.0020 [8]\t|",
            "",
            "Latency distribution:",
            "  10% in 0.0010 secs.",
            "  25% in 0.0010 secs.",
            "  50% in 0.0010 secs.",
            "  75% in 0.0010 secs.",
            "  90% in 0.0018 secs.",
            "  95% in 0.0018 secs.",
            "  99% in 0.0018 secs.",
            "  99.9% in 0.0019 secs.",
            "",
            "Error distribution:",
            "  [5]\tetcdserver: too many requests",
            "  [4]\tetcdserver: request timed out",
        ]
    )
    assert text.rstrip("\n") == expected


def test_summary_after_warmup_and_per_name(runs: Path) -> None:
    text = summary(load_run(str(runs / "one_member")), warmup=2.0)
    blocks = text.split("\n\none_member ")
    assert len(blocks) == 2  # put, then range/serializable; the aggregate only on request
    assert "  Total:\t8.0000 secs." in blocks[0]
    assert "  Requests/sec:\t998.8750" in blocks[0]  # (8000 - 9) / 8 s
    assert "  0.0010 [7191]\t|" + "∎" * 40 in blocks[0]
    assert "  99% in 0.0015 secs." in blocks[0]
    assert "  Requests/sec:\t2000.0000" in blocks[1]
    aggregated = summary(load_run(str(runs / "one_member")), name="Aggregated")
    assert aggregated.startswith("one_member Aggregated: exact")
    assert "  Requests/sec:\t2899.1000" in aggregated


def test_summary_from_locust_csv_says_so_and_skips_unknown_percentiles(runs: Path) -> None:
    text = summary(load_run(str(runs / "locust_only")), name="put")
    lines = text.splitlines()
    assert lines[0].startswith("locust_only put: from Locust's CSV (locust_only_stats.csv)")
    assert "  Requests/sec:\t594.0000" in lines  # (6000 - 60) / 10 s
    assert "  Slowest:\t0.0400 secs." in lines
    assert "  Fastest:\t0.0010 secs." in lines
    assert "  Average:\t0.0034 secs." in lines
    assert "  50% in 0.0030 secs." in lines
    assert "  99% in 0.0110 secs." in lines
    assert "  99.9% in 0.0230 secs." in lines
    assert not any(line.startswith(("  10% in", "  25% in")) for line in lines)  # Locust does not report them
    histogram = lines[lines.index("Response time histogram:") + 1 : lines.index("Response time histogram:") + 12]
    assert [line.split(" [")[0] for line in histogram][0::5] == ["  0.0010", "  0.0205", "  0.0400"]
    assert sum(int(line.split("[")[1].split("]")[0]) for line in histogram) == 6000
    errors = lines.index("Error distribution:")
    assert lines[errors : errors + 4] == [
        "Error distribution:",
        "  [45]\tetcdserver: too many requests",
        "  [10]\tUNAVAILABLE",
        "  [5]\tDEADLINE_EXCEEDED",
    ]


def test_summary_of_unknown_name_is_a_one_line_error(runs: Path) -> None:
    result = cli("summary", runs / "one_member", "--name", "watch")
    assert result.returncode == 2
    assert "no requests named 'watch'" in result.stderr
    assert "Traceback" not in result.stderr


# --- command line, files and charts -------------------------------------------------------------------------------


def test_cli_prints_the_table_and_writes_every_file(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = cli(
        runs / "one_member",
        runs / "three_members",
        "--baseline",
        runs / "one_member",
        "--warmup=2",
        "--names",
        "put,range/serializable",
        "--labels",
        "1 member,3 members",
        "--out",
        out,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "Warning" not in result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "| run | name | requests | QPS | avg (ms) | P50 (ms) | P90 (ms) | P99 (ms) | P99.9 (ms) | max (ms) | failures "
        "| error % | source | QPS % of baseline | P99 × | P99.9 × | avg × |"
    )
    assert (
        "| 1 member | put | 8000 | 1000.0 | 1.054 | 1.000 | 1.500 | 1.500 | 1.900 | 2.000 | 9 | 0.11 | exact "
        in (lines[2])
    )
    cluster_line = (
        "| 3 members | put | 3200 | 400.0 | 2.876 | 2.801 | 3.501 | 3.501 | 4.001 | 4.001 | 8 | 0.25 | exact "
    )
    assert cluster_line + "| 40.0 | 2.33 | 2.11 | 2.73 |" in lines
    assert any("QPS = requests / 8 s" in line for line in lines)

    expected_files = ["comparison.md", "comparison.csv", "report.html", "errors.csv"]
    expected_files += [
        f"{chart}.{ext}"
        for chart in ("qps_over_time", "latency_over_time", "comparison_bars")
        for ext in ("png", "svg")
    ]
    for name in expected_files:
        assert (out / name).stat().st_size > 0, name

    csv = pd.read_csv(out / "comparison.csv")
    cluster = csv[(csv["run"] == "3 members") & (csv["name"] == "put")].iloc[0]
    assert (cluster["QPS"], cluster["P99 (ms)"], cluster["QPS % of baseline"], cluster["P99 ×"]) == (
        400.0,
        3.501,
        40.0,
        2.334,
    )
    assert cluster["error %"] == 0.25
    assert set(csv["source"]) == {"exact"}
    errors = pd.read_csv(out / "errors.csv")
    assert list(errors.columns) == ["run", "error", "occurrences", "% of failures", "% of requests", "names"]
    assert errors["occurrences"].sum() == 17
    assert (out / "comparison.md").read_text(encoding="utf-8").startswith("# etcd load test comparison\n\n| run |")


def test_charts_are_png_and_parseable_svg(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "charts"
    result = cli(runs / "one_member", runs / "locust_only", "--warmup", "--out", out)
    assert result.returncode == 0, result.stderr
    for chart in ("qps_over_time", "latency_over_time", "comparison_bars"):
        assert (out / f"{chart}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        root = ElementTree.parse(out / f"{chart}.svg").getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert len(list(root.iter())) > 50  # axes, lines and text were drawn


def test_html_report_is_self_contained_and_holds_the_table(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "html"
    assert cli(runs / "one_member", runs / "three_members", "--out", out).returncode == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page and "<link" not in page and "<img" not in page
    assert page.count("<svg") == 4  # one_member has a shape record: its chart per level too
    assert '<td>three_members</td><td>put</td><td class="num">4000</td><td class="num">400.0</td>' in page
    assert "etcdserver: leader changed" in page


def test_prefix_may_be_given_as_one_of_its_files(runs: Path) -> None:
    result = cli(runs / "locust_only_stats.csv", "--names", "put")
    assert result.returncode == 0, result.stderr
    assert (
        "| locust_only | put | 6000 | 600.0 | 3.400 | 3.000 | 5.000 | 11.000 | 23.000 | 40.000 | 60 | 1.00 | locust |"
        in (result.stdout.splitlines())
    )


# --- one-line errors ----------------------------------------------------------------------------------------------


def test_missing_prefix_lists_the_files_looked_for(runs: Path) -> None:
    missing = runs / "nope"
    result = cli(missing)
    assert_one_line_error(
        result, "no run found", f"{missing}_stats.csv", f"{missing}_latency.csv", f"{missing}_latency.hlog"
    )


def test_empty_run(runs: Path) -> None:
    assert_one_line_error(cli(runs / "one_member", runs / "empty"), "recorded no requests", "empty_stats.csv")


def test_foreign_csv_names_the_missing_columns(runs: Path) -> None:
    assert_one_line_error(
        cli("summary", runs / "foreign"),
        "foreign_stats.csv was not written by Locust",
        "missing columns Type, Name, Request Count, Failure Count",
    )
    with pytest.raises(AnalysisError, match="missing columns"):
        load_run(str(runs / "foreign"))


def test_labels_must_match_the_runs(runs: Path) -> None:
    assert_one_line_error(cli(runs / "one_member", runs / "three_members", "--labels", "only one"), "2 run(s)")


def test_empty_csv_file(runs: Path) -> None:
    (runs / "one_member_failures.csv").write_text("", encoding="utf-8")
    assert_one_line_error(cli("errors", runs / "one_member"), "one_member_failures.csv is empty")


def test_broken_hlog(runs: Path) -> None:
    (runs / "one_member_latency.hlog").write_text("Tag=etcd:put:service,1700000000.000,1.000,2.000,bm90IGhkcg==\n")
    assert_one_line_error(cli(runs / "one_member", "--warmup=2"), "one_member_latency.hlog is not a readable")


# --- how skewed a run's keys were --------------------------------------------------------------------------------


def test_a_skewed_run_gets_one_note_with_its_hottest_share_from_its_summary(runs: Path) -> None:
    options = {"etcd_key_distribution": "zipfian", "etcd_key_space_size": 1000, "etcd_key_size": 32}
    summary_document = {"schema": SUMMARY_SCHEMA_VERSION, "options": options, "environment": {}}
    (runs / "one_member_summary.json").write_text(json.dumps(summary_document))
    result = cli(runs / "one_member", runs / "three_members", "--labels", "zipf,plain")
    assert result.returncode == 0, result.stderr
    share = 100 * parse_key_distribution("zipfian:0.99").hottest_share(1000)
    note = f"zipf: keys drawn zipfian:0.99: in theory {share:.1f}% of the requests to the hottest 1% of the 1000 keys."
    assert note in result.stdout
    assert result.stdout.count("keys drawn") == 1  # the run without a summary has no note


def test_a_run_whose_puts_were_counted_gets_the_counted_share_in_its_note(runs: Path) -> None:
    counted = {
        "distribution": "zipfian:0.99",
        "key_space_size": 1000,
        "hottest_keys": 10,
        "keys_written": 466,
        "writes": 2645,
        "hottest_share": 0.4011,
        "theoretical_share": 0.3983,
    }
    (runs / "one_member_skew.json").write_text(json.dumps(counted))
    result = cli(runs / "one_member", runs / "three_members", "--labels", "zipf,plain")
    assert result.returncode == 0, result.stderr
    note = (
        "zipf: 2645 puts to 466 keys, 40.1% of them to the hottest 1% (10 keys) of the 1000, counted from etcd's "
        "keys' versions (keys drawn zipfian:0.99: 39.8% in theory)."
    )
    assert note in result.stdout


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"etcd_key_distribution": "hotspot:0.1:0.9", "etcd_key_space_size": 500}, ("hotspot:0.1:0.9", 500)),
        ({"etcd_key_distribution": "uniform", "etcd_key_space_size": 500, "etcd_ycsb": "a"}, ("zipfian:0.99", 500)),
        ({"etcd_key_distribution": "uniform", "etcd_key_space_size": 500, "etcd_ycsb": ""}, None),
        ({"etcd_key_distribution": "sequential", "etcd_key_space_size": 500}, None),
        ({"etcd_sequential_keys": True, "etcd_key_space_size": 500, "etcd_ycsb": "a"}, None),
        ({"etcd_key_distribution": "zipfian:nan", "etcd_key_space_size": 500}, None),  # written by hand: no note
        ({"etcd_key_distribution": "zipfian"}, None),  # no key space size: no share to tell
    ],
)
def test_the_distribution_of_a_run_comes_from_its_options(options: dict, expected) -> None:
    found = run_distribution(options)
    assert (None if found is None else (str(found[0]), found[1])) == expected
