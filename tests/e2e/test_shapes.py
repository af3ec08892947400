"""Load shapes driving real etcd users: planned against achieved QPS, and a QPS shape without a user rate."""

from __future__ import annotations

import json
import time

import pytest
from support import member_counter, read_csv_rows, run_locust, start_locust

pytestmark = pytest.mark.e2e

# levels of 4 s at 40, 80, 120 QPS, then a 3 s spike at 200 QPS, 10 requests/s per user: a level holds a few rows
# of the history (one a second), the spike's length shows that three are enough
STEP_SPIKE = (
    "--shape-baseline-qps", "40", "--shape-baseline-time", "4",
    "--shape-step-qps", "40", "--shape-step-time", "4", "--shape-max-qps", "120",
    "--shape-spike-qps", "200", "--shape-spike-time", "3",
    "--etcd-user-rate", "10",
)  # fmt: skip


def achieved_qps(history: list[dict[str, str]], start: float, end: float) -> float:
    """Requests per second between two instants, from differences of Locust's cumulative request count."""
    rows = [row for row in history if row["Name"] == "Aggregated"]
    inside = [row for row in rows if start <= int(row["Timestamp"]) <= end]
    seconds = int(inside[-1]["Timestamp"]) - int(inside[0]["Timestamp"]) if inside else 0
    if seconds <= 0:
        return float("nan")
    return (int(inside[-1]["Total Request Count"]) - int(inside[0]["Total Request Count"])) / seconds


@pytest.mark.slow
def test_step_spike_levels_run_their_planned_users(etcd1, tmp_out):
    """The shape's part is the users: each level runs its QPS / user rate of them. What they achieve is the
    machine's, judged by the keep-up rule elsewhere (test_live_levels), so it is only printed here."""
    prefix = tmp_out / "step"
    result = run_locust(
        "-f", "locustfile.py,shapes/step_spike.py", "--headless", "--only-summary", "--csv", str(prefix),
        "--etcd-endpoints", ",".join(etcd1.endpoints), "--etcd-cleanup", *STEP_SPIKE, "EtcdPutUser",
        timeout=90,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "shape: level 4/4 'spike'" in result.stderr
    shape = json.loads((tmp_out / "step_shape.json").read_text())
    history = [row for row in read_csv_rows(f"{prefix}_stats_history.csv") if row["Name"] == "Aggregated"]
    assert [(level["qps"], level["users"]) for level in shape["levels"]] == [(40, 4), (80, 8), (120, 12), (200, 20)]
    ends = [level["started_at"] for level in shape["levels"][1:]] + [shape["ended_at"]]
    for level, end in zip(shape["levels"], ends, strict=True):
        during = [row for row in history if level["started_at"] <= int(row["Timestamp"]) < end]
        # the users rise from level to level: the most seen during a level are its own
        assert max(int(row["User Count"]) for row in during) == level["users"], (level["name"], during)
        assert level["started_at"] <= level["running_at"] < end, level  # all of them ran, inside the level
        qps = achieved_qps(history, level["started_at"] + 1, end)
        print(f"level {level['name']}: planned {level['qps']} QPS, achieved {qps:.1f}")


@pytest.mark.slow
def test_qps_shape_without_a_user_rate_is_refused_in_one_line():
    result = run_locust("-f", "locustfile.py,shapes/step_spike.py", "--headless", "EtcdPutUser", timeout=60)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert (
        "locust-etcd: error: StepSpikeShape targets QPS: set --etcd-user-rate (requests/s per user), "
        "for example --etcd-user-rate 10"
    ) in result.stderr


@pytest.mark.slow
def test_a_frozen_server_shows_in_the_intended_latency_not_only_the_service_time(fresh_etcd1, tmp_out):
    """Rate-driven users keep their schedule: requests due while etcd is frozen go out late, and their latency
    from the intended send time (the `intended` series) shows the freeze that the service time hides."""
    prefix = tmp_out / "frozen"
    with start_locust(
        "-f", "locustfile.py", "--headless", "--only-summary", "-u", "4", "-r", "4", "-t", "7s",
        "--csv", str(prefix), "--etcd-endpoints", ",".join(fresh_etcd1.endpoints), "--etcd-user-rate", "50",
        "--etcd-timeout", "10", "EtcdPutUser",
    ) as locust:  # fmt: skip
        # freeze once the users are sending (however long Locust took to start), then let them run a while
        deadline = time.monotonic() + 30
        while not sum(member_counter(fresh_etcd1, "Put")):  # etcd's own count of the puts it answered
            assert time.monotonic() < deadline and locust.poll() is None, "no put within 30 s"
            time.sleep(0.2)
        time.sleep(1)
        fresh_etcd1.pause_member(0)
        time.sleep(1.5)
        fresh_etcd1.resume_member(0)
        result = locust.finish(timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {row["Series"]: row for row in read_csv_rows(f"{prefix}_latency.csv") if row["Name"] == "put"}
    service, intended = rows["service"], rows["intended"]
    assert int(intended["Count"]) == int(service["Count"]) > 0
    # 4 users at 50/s: about 300 requests were due during the 1.5 s freeze; each user had one in flight
    assert float(intended["P99"]) > 500
    assert float(intended["Mean"]) > 2 * float(service["Mean"])
    assert float(intended["P90"]) > float(service["P90"])
