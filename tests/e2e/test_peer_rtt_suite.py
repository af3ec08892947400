"""suites/peer-rtt.yaml's quick table, run for real: three local members whose peer traffic crosses the peer proxy at
0 and 20 ms, requests to the leader at a fixed rate. A put waits for one round trip more at 20 ms, a linearizable read
for one or two, a serializable read for well under one; the analysis charts P50 against the round trip."""

import os
import subprocess
import sys

import pytest
from support import REPO, read_csv_rows

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RTT_MS = 20.0


def test_the_quick_peer_rtt_suite_shows_one_round_trip_per_commit(tmp_path):
    out, analysis = tmp_path / "peer-rtt", tmp_path / "analysis"
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    run = [sys.executable, "-m", "etcd_users.suite", "run", "suites/peer-rtt.yaml", "--quick", "--out", str(out)]
    ran = subprocess.run(run, cwd=REPO, env=environment, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert ran.stdout.count("    ok in ") == 6, ran.stdout
    made = [sys.executable, "-m", "analysis", "suite", str(out), "--out", str(analysis)]
    analysed = subprocess.run(made, cwd=REPO, env=environment, capture_output=True, text=True, timeout=300)
    assert analysed.returncode == 0, analysed.stdout[-3000:] + analysed.stderr[-3000:]
    assert (analysis / "suite_peer_rtt.png").stat().st_size > 0 and (analysis / "suite_peer_rtt.svg").is_file()
    table = read_csv_rows(analysis / "suite.csv")
    p50 = {(row["local-peer-rtt"], row["name"]): float(row["P50 (ms)"]) for row in table}
    fastest = {}  # the fastest request of each run: its round trips and the least work, whatever the machine's load
    for row in read_csv_rows(analysis / "suite_runs.csv"):
        latency = read_csv_rows(out / f"{row['run']}_latency.csv")
        [service] = [r for r in latency if r["Name"] == row["name"] and r["Series"] == "service"]
        fastest[row["local-peer-rtt"], row["name"]] = float(service["Min"])
    names = ("put", "range/linearizable", "range/serializable")
    added = {name: fastest[("20ms", name)] - fastest[("0ms", name)] for name in names}
    print(f"\nP50 {p50}\nfastest {fastest}\nadded to the fastest at {RTT_MS:g} ms: {added}")
    # a commit: one round trip to a follower; never less (the proxy delivers nothing early), and not two (21.1 ms more
    # at the least seen under CI's load, when the P50s of two runs apart differed by 38 ms: a WAL fsync P99 of 60 ms)
    assert RTT_MS * 0.95 <= added["put"] < RTT_MS * 1.5, added
    # a ReadIndex round confirms the leader: one round trip (a read that arrives while a round is on its way waits for
    # the next one too, which a P50 shows and the fastest read does not)
    assert RTT_MS * 0.95 <= added["range/linearizable"] < RTT_MS * 1.5, added
    assert added["range/serializable"] < RTT_MS / 2, added
    # every commit and every linearizable read waits the round trip, the P50 the suite's chart shows too
    assert p50[("20ms", "put")] >= RTT_MS and p50[("20ms", "range/linearizable")] >= RTT_MS, p50
