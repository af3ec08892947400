"""The client's own limits as a run says them: processes a rate needs, and a client that wanted a whole core."""

from etcd_users.features.client_bound.hooks import client_bound_line, processes_line, processes_needed


def test_a_rate_needs_its_cost_in_cores_at_90_percent_each():
    assert processes_needed(10_000, 90.0) == 1  # 0.9 s of CPU a second: one process at 90 %
    assert processes_needed(10_001, 90.0) == 2
    assert processes_needed(40_000, 95.0) == 5  # 3.8 cores' worth at 0.9 each
    assert processes_needed(0, 95.0) == 1


def test_the_processes_line_says_the_cost_the_ceiling_and_the_count_to_give():
    assert processes_line(5_000, 95.0, 1) is None
    line = processes_line(40_000, 95.0, 1)
    assert line == (
        "locust-etcd: the rate asks 40,000 requests/s, and a request costs this client 95 µs of CPU: a process sends "
        "about 9,474/s at 90 % of a core, so the rate needs 5 processes and this run has 1 process; give --processes 5 "
        "(or workers on other machines)"
    )
    assert processes_line(40_000, 95.0, 5) is None


def test_the_client_bound_line_comes_at_90_percent_of_a_core_wait_included():
    assert client_bound_line(89.9, None, 30) is None
    assert client_bound_line(55.0, 30.0, 30) is None
    line = client_bound_line(60.0, 35.0, 30)
    assert line.startswith("locust-etcd: the client was the limit: its busiest process wanted 95 % of a core over ")
    assert "(CPU 60 %, waiting 35 % for one)" in line
    assert "(CPU 97 %)" in client_bound_line(97.0, None, 12)
