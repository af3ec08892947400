"""The rule of a rate held or not, which side was short, and the line that says so."""

from __future__ import annotations

import pytest

from etcd_users.features.rate_held.hooks import Shortfall, held, short_side, shortfall_line
from etcd_users.latency.user_rate import whole_seconds


@pytest.mark.parametrize(
    ("planned", "operations", "seconds", "expected"),
    [
        (2000.0, 20 * 1800, 20, True),  # 90 %: held
        (2000.0, 20 * 1799, 20, False),
        (2000.0, 20 * 1324, 20, False),
        (10.0, 0, 0, True),  # no whole second to judge
        (0.0, 100, 10, True),  # no plan
    ],
)
def test_the_rate_is_held_at_ninety_percent_of_the_plan(planned, operations, seconds, expected):
    assert held(planned, operations, seconds) is expected


def test_the_window_is_its_whole_seconds():
    assert whole_seconds(100.2, 105.9) == range(101, 105)
    assert whole_seconds(100.0, 100.5) == range(100, 100)


def shortfall(cpu: float | None, wait: float | None = None) -> Shortfall:
    return Shortfall(2000.0, 1324.0, 20, 64, 709.0, 28.0, 30.0, cpu, wait)


def test_the_issue_s_run_was_short_on_etcd_s_side_with_the_client_at_half_a_core():
    assert shortfall(51.0).behind_s == pytest.approx(6.76)
    assert shortfall_line(shortfall(51.0)) == (
        "locust-etcd: the rate was not held: 1,324/s of the 2,000/s planned (66 %, below 90 %) over the 20 s after "
        "spawning; the schedule fell 6.8 s behind (intended P50 709 ms, service P50 28 ms); short: etcd's answers "
        "for 64 users: at 30.0 ms each, users that wait for them send at most 2,133/s; the client at 51 % of a core; "
        "give the rate to more users (a lower --etcd-user-rate)"
    )


def test_a_client_that_wanted_a_whole_core_was_the_short_side():
    # the CPU it used plus the time it waited for one: 90 % of a core or more
    assert short_side(shortfall(70.0, 25.0)) == (
        "the client's CPU (its busiest process used 70 % of a core and waited 25 % for one): add --processes N or "
        "workers"
    )
    assert short_side(shortfall(92.0)).startswith("the client's CPU (its busiest process used 92 % of a core)")
    assert short_side(shortfall(None)).startswith("etcd's answers for 64 users: at 30.0 ms each")
