"""PREFIX_summary.json, the member: gates and --etcd-perfdash against a real member and real Locust runs."""

import json

import pytest
from checks import refusal_line
from support import headless_args, read_csv_rows, run_locust

from etcd_users.files import SUMMARY_KEYS, SUMMARY_SCHEMA_VERSION
from etcd_users.members.member_figures import member_figures

pytestmark = pytest.mark.e2e

_NUMBERS = {"p50_ms": "P50", "p90_ms": "P90", "p95_ms": "P95", "p99_ms": "P99", "p99_9_ms": "P99.9"}
_NUMBERS |= {"p99_99_ms": "P99.99", "max_ms": "Max"}


def _number(text: str) -> float | None:
    return float(text) if text else None


@pytest.mark.slow
def test_the_summary_holds_the_run_s_figures_and_member_gates_judge_the_worst_member(etcd1, tmp_out):
    prefix = tmp_out / "run"
    perfdash = tmp_out / "perfdash.json"
    gates = "kubernetes-etcd,member:fsync_p99<1us,member:fsync_p99<60s,member:db_quota<100%"
    args = ("--etcd-prefix", "/test-summary/", "--etcd-cleanup", "--etcd-metrics-interval", "1")
    args += ("--etcd-sla", gates, "--etcd-perfdash", str(perfdash), "EtcdPutUser")
    result = run_locust(*headless_args(etcd1, prefix, *args, seconds=3), timeout=90)
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    assert result.returncode == 3, output[-3000:]  # the gate below what the member measured failed
    lines = [line for line in output.splitlines() if line.startswith("SLA member fsync_p99")]
    assert any(line.startswith("SLA member fsync_p99 < 1us: ") and line.endswith(" FAIL") for line in lines), lines
    assert any(line.startswith("SLA member fsync_p99 < 60s: ") and line.endswith(" PASS") for line in lines), lines

    listed = output.splitlines()
    files = listed[listed.index("Files written:") + 1 :]
    assert f"    {tmp_out / 'run_summary.json'}" in files[: files.index("")]  # the summary is listed with the rest
    summary = json.loads((tmp_out / "run_summary.json").read_text())
    assert set(summary) == set(SUMMARY_KEYS) and summary["schema"] == SUMMARY_SCHEMA_VERSION
    assert summary["ended_at"] > summary["started_at"] and summary["duration_s"] > 0
    assert summary["options"]["etcd_sla"] and summary["options"]["num_users"] == 4
    cluster = summary["environment"]["cluster"]
    assert cluster["size"] == 1 and cluster["leader"] == etcd1.endpoints[0]
    assert cluster["members"][0]["version"].startswith("3.") and cluster["members"][0]["is_leader"] is True
    assert summary["environment"]["load"]["processes"] == 1 and summary["environment"]["load"]["workers"] == 0
    # the puts per key counted from the keys' versions: every put of the run, uniform keys
    skew = summary["skew"]
    assert skew["distribution"] == "uniform" and skew["theoretical_share"] == 0.01 and skew["writes"] > 0

    # the requests: exactly the figures of PREFIX_latency.csv, the Aggregated row included
    latency = read_csv_rows(tmp_out / "run_latency.csv")
    assert [(r["type"], r["name"], r["series"]) for r in summary["requests"]] == [
        (row["Type"], row["Name"], row["Series"]) for row in latency
    ]
    for request, row in zip(summary["requests"], latency, strict=True):
        assert (request["count"], request["failures"]) == (int(row["Count"]), int(row["Failures"]))
        assert {key: request[key] for key in _NUMBERS} == {key: _number(row[col]) for key, col in _NUMBERS.items()}
    assert latency[0]["Name"] == "put" and summary["requests"][0]["count"] > 0

    # the members: what member_figures computes from PREFIX_etcd_metrics.csv
    rows = read_csv_rows(tmp_out / "run_etcd_metrics.csv")
    assert len(rows) >= 3  # at the start, every second, at the end
    assert summary["members"] == member_figures(rows).to_dict()
    assert summary["members"]["fsync_p99_ms"]["member"] == etcd1.endpoints[0]
    assert summary["members"]["peer_rtt_p99_ms"] == {"value": None, "member": None}  # one member: no peers

    # every gate judged, the ready set expanded to its own
    judged = {gate["gate"]: gate for gate in summary["gates"]}
    assert list(judged) == [
        *("member:fsync_p99<10ms", "member:peer_rtt_p99<100ms", "member:leader_changes<1"),
        *("member:fsync_p99<1us", "member:fsync_p99<60s", "member:db_quota<100%"),
    ]
    assert judged["member:fsync_p99<1us"]["passed"] is False
    assert judged["member:fsync_p99<60s"]["passed"] is True
    assert judged["member:fsync_p99<1us"]["value"] == pytest.approx(
        summary["members"]["fsync_p99_ms"]["value"] * 1000, abs=1
    )
    assert judged["member:peer_rtt_p99<100ms"] == {"gate": "member:peer_rtt_p99<100ms", "value": None, "passed": True}

    document = json.loads(perfdash.read_text())
    assert document["version"] == "v1"
    put = next(item for item in document["dataItems"] if item["labels"]["Operation"] == "put")
    assert put["unit"] == "ms" and put["labels"]["Metric"] == "latency"
    assert put["data"] == {
        "Perc50": _number(latency[0]["P50"]),
        "Perc90": _number(latency[0]["P90"]),
        "Perc99": _number(latency[0]["P99"]),
    }


@pytest.mark.slow
def test_a_member_gate_without_polling_and_an_unwritable_perfdash_are_one_line_errors(etcd1, tmp_out):
    base = ("-f", "locustfile.py", "--headless", "-u", "1", "-t", "1s", "--etcd-endpoints", etcd1.endpoints[0])
    result = run_locust(*base, "--etcd-metrics-interval", "0", "--etcd-sla", "member:fsync_p99<10ms", "EtcdPutUser")
    assert refusal_line(result) == (
        "locust-etcd: error: --etcd-sla: 'member:fsync_p99<10ms' judges the members' /metrics, and "
        "--etcd-metrics-interval 0 polls none; give an interval such as --etcd-metrics-interval 5, or drop the gate"
    )
    missing = tmp_out / "no-such-dir" / "perfdash.json"
    result = run_locust(*base, "--etcd-perfdash", str(missing), "EtcdPutUser")
    line = refusal_line(result)
    assert line.startswith("locust-etcd: error: --etcd-perfdash: the directory ") and "does not exist" in line
