"""suites/peer-rtt.yaml's quick table, run for real: three local members whose peer traffic crosses the peer proxy at
0 and 20 ms, requests to the leader at a fixed rate. A put waits for one round trip more at 20 ms, a linearizable read
for one or two, a serializable read for well under one; the analysis charts P50 against the round trip."""

import csv
import os
import subprocess
import sys

import pytest
from support import REPO

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
    with open(analysis / "suite.csv", newline="") as file:
        p50 = {(row["local-peer-rtt"], row["name"]): float(row["P50 (ms)"]) for row in csv.DictReader(file)}
    names = ("put", "range/linearizable", "range/serializable")
    added = {name: p50[("20ms", name)] - p50[("0ms", name)] for name in names}
    print(f"\n{p50}\nadded at {RTT_MS:g} ms: {added}")
    # a commit: one round trip to a follower, within ±30 % (20.7 ms in one run)
    assert RTT_MS * 0.7 < added["put"] < RTT_MS * 1.3, added
    # a ReadIndex round confirms the leader: one round trip, and up to one more for a read that arrives while a round
    # is on its way, which etcd serves with the next round (28.6 ms in one run)
    assert RTT_MS * 0.7 < added["range/linearizable"] < RTT_MS * 2.3, added
    assert added["range/serializable"] < RTT_MS / 2, added
