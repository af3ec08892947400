"""The end of a run in the terminal, pure: the exact latency table and the files listed after it. The lines a real run
prints, and its completed ``_stats.csv``, are ``tests/e2e/test_end_of_run.py``."""

import locust  # noqa: F401  (gevent patching before anything else loads: the latency store is imported below)

import os

from etcd_users.features.latency.end_of_run import files_lines, run_files
from etcd_users.hdr import SIGNIFICANT_FIGURES, histogram_of, percentiles_us
from etcd_users.latency.store import LatencyRow
from etcd_users.latency.table import TITLE, table_lines


def row(
    name, series="service", count=10, failures=0, p50=0.6, p90=0.958, p99=1.95, p999=4.251, max_ms=12.0, kind="etcd"
):
    return LatencyRow(kind, name, series, count, failures, 0.1, 0.7, p50, p90, 1.0, p99, p999, 8.0, max_ms)


def test_the_table_has_microsecond_figures_service_before_intended_and_aggregated_last():
    rows = [
        LatencyRow("", "Aggregated", "service", 25, 5, *[0.5] * 9),
        row("put", "intended", p50=31.183),
        row("put"),
        row("range/serializable", count=5, failures=5, p50=None, p90=None, p99=None, p999=None, max_ms=None),
    ]
    lines = table_lines(rows)
    assert lines[:3] == [
        TITLE,
        "Type     Name                Series      # reqs   # fails       P50       P90       P99     P99.9       Max",
        "-" * 107,
    ]
    assert lines[3:] == [
        "etcd     put                 service         10         0     0.600     0.958     1.950     4.251    12.000",
        "etcd     put                 intended        10         0    31.183     0.958     1.950     4.251    12.000",
        "etcd     range/serializable  service          5         5         -         -         -         -         -",
        "-" * 107,
        "         Aggregated          service         25         5     0.500     0.500     0.500     0.500     0.500",
    ]


def test_the_title_says_the_precision_the_histograms_keep():
    # one line, and true: to the microsecond below 2 ms, a coarser bucket above (32 µs wide near 40 ms)
    assert "\n" not in TITLE and f"{SIGNIFICANT_FIGURES} significant digits: to the µs below 2 ms" in TITLE
    for micros in (1, 999, 1_500, 1_999, 2_047):
        assert percentiles_us(histogram_of([micros / 1000]), [100]) == [micros]
    near_40_ms = histogram_of([40.001])
    assert percentiles_us(near_40_ms, [100]) == [40_031]  # the top of its bucket, 40.000-40.031 ms
    assert near_40_ms.get_highest_equivalent_value(40_001) - near_40_ms.get_lowest_equivalent_value(40_001) == 31


def test_no_request_no_table():
    assert table_lines([]) == []
    assert table_lines([LatencyRow("", "Aggregated", "service", 0, 0, *[None] * 9)]) == []


def test_the_files_are_those_of_this_run_exact_latency_first(tmp_path):
    prefix = str(tmp_path / "run")
    for suffix in ("_stats.csv", "_latency.hlog", "_latency.csv", "_etcd_metrics.csv", "_shape.json"):
        (tmp_path / f"run{suffix}").write_text("x")
    os.utime(tmp_path / "run_shape.json", (1000, 1000))  # a previous run's
    (tmp_path / "report.html").write_text("x")
    found = run_files(prefix, [str(tmp_path / "report.html"), None, str(tmp_path / "missing.json")], since=2000)
    assert found == [
        f"{prefix}_latency.csv",
        f"{prefix}_latency.hlog",
        f"{prefix}_stats.csv",
        f"{prefix}_etcd_metrics.csv",
        str(tmp_path / "report.html"),
    ]
    assert files_lines(found[:1]) == ["Files written:", f"    {prefix}_latency.csv"]
    assert run_files(None) == [] and files_lines([]) == []
