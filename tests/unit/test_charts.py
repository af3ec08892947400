"""The log latency axes of the charts read in plain milliseconds: ticks at 1-2-5 steps within the data's range,
labelled 0.5, 1, 2, 5, 10 (never 3 × 10^0), minor ticks unlabelled."""

from __future__ import annotations

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from etcd_users.analysis.charts import log_ms_axis, log_ticks, plain_number


@pytest.mark.parametrize(
    ("low", "high", "labels"),
    [
        (0.3, 7, ["0.5", "1", "2", "5"]),
        (1, 100, ["1", "2", "5", "10", "20", "50", "100"]),
        (0.05, 0.2, ["0.05", "0.1", "0.2"]),
        (0.4, 600, ["0.5", "1", "2", "5", "10", "20", "50", "100", "200", "500"]),
        # too many 1-2-5 ticks: decades alone; too few: every digit, then round linear steps
        (0.8, 2500, ["1", "10", "100", "1000"]),
        (0.001, 100_000, ["0.001", "0.01", "0.1", "1", "10", "100", "1000", "10000", "100000"]),
        (0.3, 0.45, ["0.3", "0.4"]),
        (12, 18, ["12", "14", "16", "18"]),
    ],
)
def test_log_ticks_are_1_2_5_steps_within_the_range_printed_as_plain_numbers(low, high, labels):
    ticks = log_ticks(low, high)
    assert [plain_number(tick) for tick in ticks] == labels
    assert all(low <= tick <= high for tick in ticks)
    assert [float(label) for label in labels] == ticks  # each tick is the number its label says


def test_plain_number_has_no_exponent_and_no_trailing_zero():
    assert [plain_number(v) for v in (0.0005, 0.05, 0.5, 1.0, 20.0, 1e6, 2 * 0.1, 3 * 0.1)] == [
        "0.0005", "0.05", "0.5", "1", "20", "1000000", "0.2", "0.3",
    ]  # fmt: skip


def test_a_log_latency_axis_shows_its_1_2_5_ticks_in_plain_milliseconds_and_leaves_minor_ticks_bare():
    figure = Figure()
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    axes.plot([0, 1, 2], [0.3, 1.4, 7.0])
    log_ms_axis(axes)
    axes.set_ylim(0.3, 7.0)
    figure.canvas.draw()
    major = [
        (tick.get_loc(), tick.label1.get_text()) for tick in axes.yaxis.get_major_ticks() if tick.label1.get_visible()
    ]
    assert [label for loc, label in major if 0.3 <= loc <= 7.0] == ["0.5", "1", "2", "5"]
    assert all("10^" not in text and "$" not in text for _, text in major)
    minor = [tick.label1.get_text() for tick in axes.yaxis.get_minor_ticks()]
    assert minor and all(text == "" for text in minor)
