"""``python -m analysis compare``: the statistics, the --max-regress grammar, the unfair lines, the files.

Runs are written with etcd_users.latency's own writer: 20 seconds of 500 requests each, latencies drawn from a
log-normal around 1 ms (seeded), so that two runs drawn alike differ only by noise and a run drawn with every
latency doubled is a known regression of P50 and P99 by +100 %.
"""

from __future__ import annotations

import itertools
import json
import math
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np
import pytest
from support import assert_one_line_error
from support import run_analysis as cli

from etcd_users import hdr
from etcd_users.analysis.compare import BASELINE, CANDIDATE, compare, load_side, verdict
from etcd_users.analysis.compare_noise import Noise, calibration_document, read_calibration
from etcd_users.analysis.fairness import facts, parse_changed, unfair_lines
from etcd_users.analysis.load import load_run
from etcd_users.analysis.rank_test import least_runs, p_greater, p_two_sided, runs_a_side, shift_interval, u_counts
from etcd_users.analysis.resampling import LatencyCounts, block_weights, generator
from etcd_users.analysis.tolerance import BY_KEY, ToleranceError, parse_tolerances
from etcd_users.files import SERVICE, SUMMARY_SCHEMA_VERSION
from etcd_users.latency.store import SealedInterval, summary_row
from etcd_users.latency.writer import LatencyFiles

T0 = 1_700_000_000
SECONDS = 20
PER_SECOND = 500
KEY = ("etcd", "put", SERVICE)


def write_run(prefix: Path, seed: int, scale: float = 1.0, failures_per_second: int = 0) -> str:
    rng = np.random.default_rng(seed)
    intervals, total, failed = [], None, 0
    for second in range(SECONDS):
        latencies_ms = scale * rng.lognormal(mean=0.0, sigma=0.5, size=PER_SECOND - failures_per_second)
        histogram = hdr.histogram_of(latencies_ms)
        intervals.append(SealedInterval(T0 + second, KEY, histogram, failures_per_second))
        total = hdr.add(total, histogram)
        failed += failures_per_second
    files = LatencyFiles(str(prefix), T0)
    files.append(intervals)
    files.write_summary([summary_row(KEY, total, failed)], T0 + 0.01, T0 + SECONDS - 0.01)
    files.close()
    return str(prefix)


def rows_of(comparison) -> dict[str, object]:
    return {row.metric.key: row for row in comparison.rows}


def compared(baseline: str, candidate: str, text: str | None = None):
    return compare(load_side(baseline, BASELINE), load_side(candidate, CANDIDATE), parse_tolerances(text))


# --- statistics ---------------------------------------------------------------------------------------------------


def test_two_runs_drawn_from_one_distribution_compare_same_on_every_row(tmp_path: Path):
    rows = rows_of(compared(write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 2)))
    metrics = ("qps", "p50", "p99", "p99.9", "errors")
    assert {key: row.verdict for key, row in rows.items()} == dict.fromkeys(metrics, "same")
    p99 = rows["p99"]
    assert p99.low < p99.difference < p99.high  # the observed difference lies in its interval
    assert rows["qps"].baseline == PER_SECOND and rows["qps"].difference == 0  # seconds 1..18: the edges left out
    assert rows["errors"].low == rows["errors"].high == 0


def calibrated(tmp_path: Path, scales=(1.0, 1.0, 1.0, 1.0)) -> Path:
    """A calibration from A/A runs drawn alike but for each run's latency scale (the machine's run-to-run noise)."""
    runs = [write_run(tmp_path / f"aa-{index}", 100 + index, scale=scale) for index, scale in enumerate(scales)]
    path = tmp_path / "noise.json"
    result = cli("calibrate", ",".join(runs), "--out", path)
    assert result.returncode == 0, result.stderr
    return path


def test_one_run_a_side_without_a_calibration_is_inconclusive_never_worse(tmp_path: Path):
    a, b = write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 2, scale=2.0)
    rows = rows_of(compared(a, b))
    for key in ("p50", "p99"):  # far beyond the runs' own drift, but that is a lower bound of run-to-run noise
        assert rows[key].verdict == "inconclusive" and rows[key].noise == "drift"
        assert 80 < rows[key].difference < 120 and rows[key].low > 15
    result = cli("compare", a, b, "--out", tmp_path / "out")
    assert result.returncode == 0, result.stdout + result.stderr
    last = result.stdout.splitlines()[-1]
    assert last.startswith("inconclusive: one run a side: 3 of 5 row(s) beyond the tolerance"), last
    assert "runs a side would decide" in last and "--noise FILE" in last
    document = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert document["worse"] == 0 and document["inconclusive"] == 3 and document["verdict"] == last
    suite = ElementTree.parse(tmp_path / "out" / "compare.xml").getroot().find("testsuite")
    skipped = [case.find("skipped").get("message") for case in suite if case.find("skipped") is not None]
    assert suite.get("failures") == "0" and len(skipped) == 3 and skipped[0].startswith("inconclusive: p50")


def test_one_run_a_side_with_a_calibration_compares_worse_by_about_100_percent(tmp_path: Path):
    noise = calibrated(tmp_path)
    a, b = write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 2, scale=2.0)
    comparison = compare(
        load_side(a, BASELINE), load_side(b, CANDIDATE), parse_tolerances(None), calibration=read_calibration(noise)
    )
    rows = rows_of(comparison)
    for key in ("p50", "p99"):
        assert rows[key].verdict == "worse" and rows[key].noise == "calibrated"
        assert 80 < rows[key].difference < 120 and rows[key].low > 15
    assert rows["qps"].verdict == "same"
    back = rows_of(
        compare(
            load_side(b, BASELINE), load_side(a, CANDIDATE), parse_tolerances(None), calibration=read_calibration(noise)
        )
    )
    assert back["p50"].verdict == "better"
    result = cli("compare", a, b, "--noise", noise)
    assert result.returncode == 3 and result.stdout.splitlines()[-1].startswith("REGRESSION: 3 of 5"), result.stdout


def test_a_difference_that_the_calibrations_runs_show_is_not_worse(tmp_path: Path):
    # A/A runs whose latency moved 0.7x to 1.4x from run to run: a 1.5x candidate is within that noise
    noise = calibrated(tmp_path, scales=(0.7, 1.0, 1.4, 0.9))
    a, b = write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 2, scale=1.5)
    result = cli("compare", a, b, "--noise", noise, "--out", tmp_path / "out")
    assert result.returncode == 0, result.stdout
    found = {row["metric"]: row for row in json.loads((tmp_path / "out" / "compare.json").read_text())["rows"]}
    assert found["p50"]["verdict"] == "same" and found["p50"]["difference"] > 40
    assert found["p50"]["detectable"] > 100  # the noise hides anything short of about twice
    assert found["p50"]["runs_needed"] > 10


def test_the_could_have_detected_line_names_each_metric(tmp_path: Path):
    a, b = write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 2)
    result = cli("compare", a, b, "--noise", calibrated(tmp_path))
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("could have detected")]
    assert line.startswith("could have detected (put, 18 vs 18 seconds): qps -"), line
    assert ", p50 +" in line and ", errors +" in line and "runs a side to find twice the tolerance worse: qps " in line


def test_a_calibration_from_too_few_runs_or_not_a_calibration_is_one_line(tmp_path: Path):
    a, b = write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 2)
    assert_one_line_error(cli("calibrate", f"{a},{b}", "--out", tmp_path / "n.json"), "give 3 or more")
    (tmp_path / "bad.json").write_text("{}")
    assert_one_line_error(cli("compare", a, b, "--noise", tmp_path / "bad.json"), "--noise", "not a calibration")
    assert_one_line_error(cli("compare", a, b, "--noise", tmp_path / "none.json"), "no such file", "calibrate")


def test_errors_compare_in_percentage_points(tmp_path: Path):
    noise = calibrated(tmp_path)
    a, b = write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 1, failures_per_second=5)
    comparison = compare(
        load_side(a, BASELINE), load_side(b, CANDIDATE), parse_tolerances(None), calibration=read_calibration(noise)
    )
    rows = rows_of(comparison)
    assert rows["errors"].candidate == pytest.approx(1.0) and rows["errors"].difference == pytest.approx(1.0)
    assert rows["errors"].verdict == "worse"


def test_the_output_is_reproducible(tmp_path: Path):
    a, b = write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 2)
    first, second = compared(a, b), compared(a, b)
    assert [(row.low, row.high) for row in first.rows] == [(row.low, row.high) for row in second.rows]


def test_repeats_use_the_rank_interval_of_the_repeats_figures(tmp_path: Path):
    for index in range(4):
        write_run(tmp_path / f"base-{index}", 10 + index)
        write_run(tmp_path / f"cand-{index}", 20 + index, scale=1.5)
    comparison = compared(str(tmp_path / "base-*"), ",".join(str(tmp_path / f"cand-{i}") for i in range(4)))
    rows = rows_of(comparison)
    assert rows["p50"].method == "repeats" and rows["p50"].sizes == (4, 4)
    assert rows["p50"].verdict == "worse" and 40 < rows["p50"].difference < 60
    assert 15 < rows["p50"].detectable < rows["p50"].low  # these runs barely vary: close to the tolerance


def test_three_repeats_a_side_cannot_reach_95_percent_and_say_so(tmp_path: Path):
    for index in range(3):
        write_run(tmp_path / f"base-{index}", 10 + index)
        write_run(tmp_path / f"cand-{index}", 20 + index, scale=1.5)
    result = cli("compare", str(tmp_path / "base-*"), str(tmp_path / "cand-*"))
    assert result.returncode == 0, result.stdout
    last = result.stdout.splitlines()[-1]
    assert last.startswith("inconclusive: 3 runs a side: 3 of 5 row(s)") and "4 runs a side would decide" in last
    assert "p50 none (too few runs for a 95 % rank interval)" in result.stdout


def test_mann_whitney_exact_p_values_on_small_known_samples():
    assert p_greater([1, 2, 3], [4, 5, 6]) == pytest.approx(1 / 20)  # all apart: 1 of C(6, 3) orderings
    assert p_two_sided([1, 2, 3], [4, 5, 6]) == pytest.approx(0.1)  # benchstat's floor at 3 a side
    assert p_greater([1, 2, 3, 4], [5, 6, 7, 8]) == pytest.approx(1 / 70)
    # 5 and 5 with U = 2: orderings with U <= 2 are 1 + 1 + 2 of 252
    assert p_greater([1, 2, 3, 4, 7], [5, 6, 8, 9, 10]) == pytest.approx(4 / 252)
    assert p_greater([4, 5, 6], [1, 2, 3]) == pytest.approx(1.0)


@pytest.mark.parametrize(("n", "m"), [(2, 3), (3, 3), (4, 5)])
def test_u_counts_match_every_ordering_counted_by_hand(n: int, m: int):
    found = [0] * (n * m + 1)
    for first in itertools.combinations(range(n + m), n):  # the ranks the first sample takes
        second = [rank for rank in range(n + m) if rank not in first]
        found[sum(a > b for a in first for b in second)] += 1
    assert list(u_counts(n, m)) == found


def test_the_rank_interval_of_a_known_shift():
    shift, low, high = shift_interval([1, 2, 3, 4, 5], [11, 12, 13, 14, 15])
    # 25 differences 6..14; k = 3 at 95 % (P(U <= 2) = 4/252): the 3rd smallest and the 3rd largest
    assert (shift, low, high) == (10, 7, 13)
    assert shift_interval([1, 2, 3], [4, 5, 6])[1:] == (-math.inf, math.inf)
    assert least_runs() == 4


def test_block_weights_keep_each_runs_seconds_and_draw_contiguous_blocks():
    weights = block_weights([10, 5], generator("test"), replicates=200)
    assert weights.shape == (200, 15)
    assert (weights[:, :10].sum(axis=1) == 10).all() and (weights[:, 10:].sum(axis=1) == 5).all()


def test_percentiles_of_merged_seconds_are_hdrhistograms_own():
    rng = np.random.default_rng(3)
    histograms = [hdr.histogram_of(rng.lognormal(size=300)) for _ in range(4)]
    counts = LatencyCounts(histograms)
    merged = hdr.merge(histograms)
    expected = [value / 1000 for value in hdr.percentiles_us(merged, [50, 99, 99.9])]
    assert counts.percentiles_ms(np.ones(4), [50, 99, 99.9])[0].tolist() == expected


def test_verdicts_need_the_whole_interval_beyond_the_tolerance():
    p99, qps = BY_KEY["p99"], BY_KEY["qps"]
    assert verdict(p99, 16, 40, 15) == "worse"
    assert verdict(p99, 14, 40, 15) == "same"  # could be within the tolerance
    assert verdict(p99, -40, -16, 15) == "better"
    assert verdict(qps, -30, -11, 10) == "worse" and verdict(qps, -30, -9, 10) == "same"
    assert verdict(p99, None, None, 15) == "n/a"


# --- --max-regress ------------------------------------------------------------------------------------------------


def test_max_regress_overrides_the_given_metrics_only():
    tolerances = parse_tolerances("p99:+20%, qps:-5%,errors:+0.5pp")
    assert tolerances == {"qps": 5.0, "p50": 15.0, "p99": 20.0, "p99.9": 25.0, "errors": 0.5}
    assert parse_tolerances("p99.9:30%")["p99.9"] == 30.0  # the sign may be left out


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("p99", "is not METRIC:CHANGE"),
        ("p98:+15%", "unknown metric 'p98'"),
        ("p99:-15%", "p99 gets worse going up; write p99:+15%"),
        ("qps:+10%", "qps gets worse going down; write qps:-10%"),
        ("errors:+1%", "errors takes pp"),
        ("p99:+15pp", "p99 takes %"),
        ("p99:+15%,p99:+20%", "p99 is given twice"),
        ("p99:+nan%", "is not METRIC:CHANGE"),
        ("", "is empty"),
    ],
)
def test_max_regress_refuses_bad_items_in_one_line(text: str, fragment: str):
    with pytest.raises(ToleranceError, match=None) as raised:
        parse_tolerances(text)
    assert fragment in str(raised.value) and "--max-regress" in str(raised.value)


# --- unfair comparisons ------------------------------------------------------------------------------------------


def summary(**changes) -> dict:
    options = {"num_users": 16, "spawn_rate": 16, "etcd_key_size": 8, "etcd_val_size": 256, "csv_prefix": "x"}
    document = {
        "schema": SUMMARY_SCHEMA_VERSION,
        "options": options | changes.get("options", {}),
        "environment": {
            "cluster": {"size": changes.get("size", 1), "members": [{"version": changes.get("version", "3.5.1")}]},
            "load": {"cores": 2, "processes": 1, "workers": 0, "python": "3.11.7", "locust": "2.47.0"},
        },
    }
    return document


def test_unfair_lines_name_every_difference_but_the_changed_ones(tmp_path: Path):
    a, b = write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 2)
    Path(a + "_summary.json").write_text(json.dumps(summary()))
    Path(b + "_summary.json").write_text(
        json.dumps(summary(options={"etcd_key_size": 64, "etcd_val_size": 1024, "csv_prefix": "y"}, version="3.5.9"))
    )
    lines = unfair_lines([load_run(a)], [load_run(b)], parse_changed("--etcd-val-size"))
    assert lines == [
        "unfair: etcd_key_size differs: baseline 8, candidate 64 (not in --changed).",
        "unfair: etcd_version differs: baseline 3.5.1, candidate 3.5.9 (not in --changed).",
    ]
    assert unfair_lines([load_run(a)], [load_run(b)], parse_changed("etcd_key_size,value-size,etcd-version")) == []
    assert "csv_prefix" not in facts(summary())  # where the files went is no difference


def test_a_run_without_summary_says_the_fairness_could_not_be_checked(tmp_path: Path):
    a, b = write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 2)
    Path(a + "_summary.json").write_text(json.dumps(summary()))
    (line,) = unfair_lines([load_run(a)], [load_run(b)], set())
    assert line.startswith("fairness not checked: candidate run b has no b_summary.json")
    assert "b_latency.hlog" in line


def test_a_summary_of_another_schema_is_refused(tmp_path: Path):
    a, b = write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 2)
    Path(a + "_summary.json").write_text(json.dumps({"schema": 99}))
    result = cli("compare", a, b)
    assert_one_line_error(result, "a_summary.json has summary schema 99; this reader knows 1")


# --- the command --------------------------------------------------------------------------------------------------


def test_the_command_prints_the_unfair_lines_first_and_exits_3_on_a_regression(tmp_path: Path):
    a, b = write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 2, scale=2.0)
    Path(a + "_summary.json").write_text(json.dumps(summary()))
    Path(b + "_summary.json").write_text(json.dumps(summary(options={"etcd_key_size": 64})))
    out = tmp_path / "out"
    result = cli("compare", a, b, "--out", out, "--noise", calibrated(tmp_path))
    assert result.returncode == 3, result.stderr
    first = result.stdout.splitlines()[0]
    assert first == "unfair: etcd_key_size differs: baseline 8, candidate 64 (not in --changed)."
    assert "REGRESSION" in result.stdout.splitlines()[-1]
    document = json.loads((out / "compare.json").read_text())
    assert document["exit_code"] == 3 and document["unfair"][0].startswith("unfair: etcd_key_size")
    markdown = (out / "compare.md").read_text()
    assert markdown.index("unfair:") < markdown.index("| name |")
    suite = ElementTree.parse(out / "compare.xml").getroot().find("testsuite")
    assert suite.get("tests") == "5" and int(suite.get("failures")) >= 2
    assert "etcd before and after" in (out / "report.html").read_text()
    assert (out / "compare.csv").read_text().startswith("cell,level,name,metric")


def test_the_section_goes_first_into_an_existing_report(tmp_path: Path):
    a, b = write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 2)
    out = tmp_path / "out"
    assert cli(a, b, "--out", out).returncode == 0  # the side-by-side report
    assert cli("compare", a, b, "--out", out).returncode == 0
    assert cli("compare", a, b, "--out", out).returncode == 0  # written again, not twice
    page = (out / "report.html").read_text()
    assert page.count("etcd before and after</h2>") == 1
    assert page.index("etcd before and after") < page.index("<h2>Comparison</h2>")


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (("--max-regress", "p99:-5%"), "--max-regress: 'p99:-5%': p99 gets worse going up"),
        (("--names", "nothing"), "no request name in common between the two sides among nothing"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, arguments, fragment: str):
    a, b = write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 2)
    assert_one_line_error(cli("compare", a, b, *arguments), fragment)


def test_a_side_that_matches_no_run_is_one_line(tmp_path: Path):
    a = write_run(tmp_path / "a", 1)
    assert_one_line_error(cli("compare", a, str(tmp_path / "none-*")), "candidate", "matches no run")
    assert_one_line_error(cli("compare", a, str(tmp_path / "missing")), "no run found at prefix")


def test_a_comparison_written_twice_to_its_own_page_shows_once(tmp_path: Path):
    a, b = write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 2)
    out = tmp_path / "out"
    for _ in range(2):
        assert cli("compare", a, b, "--out", out).returncode == 0
    page = (out / "report.html").read_text()
    assert page.count("etcd before and after</h2>") == 1
    assert page.index("<h1>") < page.index('<section id="compare">') < page.index("</html>")


def write_client_cpu(prefix: str, wait_pct: float) -> None:
    lines = ["Timestamp,Process,CpuPct,WaitPct"] + [f"{T0 + s},local,40.0,{wait_pct}" for s in range(SECONDS)]
    Path(prefix + "_client_cpu.csv").write_text("\n".join(lines) + "\n")


def test_a_line_says_when_one_side_ran_on_a_busier_machine(tmp_path: Path):
    a, b = write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 2)
    write_client_cpu(a, 5.0)
    write_client_cpu(b, 40.0)
    result = cli("compare", a, b)
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("machine load:")]
    assert line.startswith("machine load: the baseline's Locust waited for a CPU 5 % of the time, the candidate's 40 %")
    assert "the candidate ran on a busier machine" in line
    write_client_cpu(b, 12.0)  # 7 points apart: no line
    assert "machine load:" not in cli("compare", a, b).stdout


def test_the_per_second_line_holds_the_median_of_each_seconds_percentiles(tmp_path: Path):
    a, b = write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 2, scale=2.0)
    comparison = compared(a, b)
    (line,) = comparison.per_second
    assert line.startswith("per second (put): median P50 ")
    # a log-normal with mu 0: each second's median near 1 ms, doubled in the candidate
    base, cand = (float(figure) for figure in line.split("median P50 ")[1].split(" ms")[0].split(" → "))
    assert 0.9 < base < 1.1 and 1.9 < cand / base < 2.1


def test_one_run_a_side_under_different_machine_load_is_inconclusive_even_with_a_calibration(tmp_path: Path):
    noise = calibrated(tmp_path)
    a, b = write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 2, scale=2.0)
    write_client_cpu(a, 5.0)
    write_client_cpu(b, 40.0)  # the candidate ran while other work took the CPU: its latency is not the change's
    result = cli("compare", a, b, "--noise", noise)
    assert result.returncode == 0, result.stdout
    last = result.stdout.splitlines()[-1]
    assert last.startswith("inconclusive: one run a side under different machine load"), last
    write_client_cpu(b, 8.0)  # alike: the calibration vouches for the verdict
    assert cli("compare", a, b, "--noise", noise).returncode == 3


def test_a_warm_up_cut_on_one_side_only_is_noted(tmp_path: Path):
    a, b = write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 2)
    Path(a + "_shape.json").write_text(json.dumps({"started_at": T0, "levels": [], "warmup_end": T0 + 5}))
    comparison = compare(load_side(a, BASELINE), load_side(b, CANDIDATE), parse_tolerances(None), warmup="auto")
    (note,) = [note for note in comparison.notes if "not trimmed alike" in note]
    assert note.startswith("warm-up not trimmed alike: no cut on candidate b while other runs were cut")
    assert rows_of(comparison)["p50"].sizes == (14, 18)  # seconds 5..18 of a (after the cut), 1..18 of b
    assert not [note for note in compared(a, b).notes if "not trimmed alike" in note]  # no --warmup: no cut at all


def test_could_have_detected_is_the_tolerance_plus_the_intervals_bad_half(tmp_path: Path):
    noise = calibrated(tmp_path, scales=(0.9, 1.0, 1.1, 1.0))
    a, b = write_run(tmp_path / "a", 1), write_run(tmp_path / "b", 2, scale=1.2)
    comparison = compare(
        load_side(a, BASELINE), load_side(b, CANDIDATE), parse_tolerances(None), calibration=read_calibration(noise)
    )
    p50 = rows_of(comparison)["p50"]
    # on the log scale: ln(1.15) + (ln(1 + difference) - ln(1 + low))
    expected = 100 * (1.15 * (1 + p50.difference / 100) / (1 + p50.low / 100) - 1)
    assert p50.detectable == pytest.approx(expected, rel=1e-6) and p50.detectable > 15


def test_runs_a_side_for_twice_the_tolerance():
    # one run's P99 varies by 20 % (log spread 0.2); twice +15 % lies ln(1.30 / 1.15) beyond the tolerance:
    # 2 * ((1.96 + 0.84) * 0.2 / 0.1226)^2 / (3 / pi) = 43.7
    assert runs_a_side(0.2, math.log(1.30 / 1.15)) == 44
    assert runs_a_side(0.0, 0.1) == 4  # no noise: the rank test's floor
    assert runs_a_side(math.nan, 0.1) is None


def test_a_name_the_calibration_lacks_takes_its_widest_spread_with_a_note(tmp_path: Path):
    path = tmp_path / "noise.json"
    document = calibration_document(["x", "y", "z"], [10, 10, 10], {})
    document["spreads"] = {"put": {"p99": 0.2}, "range": {"p99": 0.5}}
    path.write_text(json.dumps(document))
    found, note = read_calibration(path).noise("txn", BY_KEY["p99"])
    assert found.spread == 0.5 and found.runs == 3 and note.startswith("noise.json has no 'txn'")
    assert read_calibration(path).noise("put", BY_KEY["p99"]) == (Noise(0.2, "calibrated", 3), None)
