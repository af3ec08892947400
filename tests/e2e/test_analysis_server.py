"""The server columns of ``python -m analysis`` from a real three-member run, against the run's own
``_etcd_metrics.csv`` read here without the analysis package."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import headless_args, read_csv_rows, run_locust
from support import run_analysis as cli

from etcd_users.analysis.server import MB, SERVER_COLUMNS

pytestmark = pytest.mark.e2e


# --- a real run ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_real_three_member_run_fills_the_server_columns(etcd3, tmp_out: Path) -> None:
    prefix = tmp_out / "P"
    args = headless_args(etcd3, prefix, "--etcd-prefix", "/test-analysis-server/", users=4, seconds=6)
    result = run_locust(*args, "--etcd-metrics-interval", "1", "--etcd-cleanup", "EtcdPutUser", timeout=90)
    assert result.returncode == 0, result.stderr[-3000:]
    analysis = cli(prefix)
    assert analysis.returncode == 0, analysis.stderr
    lines = analysis.stdout.splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    start = header.index(SERVER_COLUMNS[0])
    assert header[start : start + len(SERVER_COLUMNS)] == list(SERVER_COLUMNS)
    put = dict(zip(header, (cell.strip() for cell in lines[2].strip("|").split("|")), strict=True))
    assert put["name"] == "put"

    # the oracle: each member's answered polls in the file; a poll after the first closes an interval
    polls: dict[str, list[dict[str, str]]] = {}
    for row in read_csv_rows(f"{prefix}_etcd_metrics.csv"):
        if row["Error"] == "":
            polls.setdefault(row["Member"], []).append(row)
    assert len(polls) == 3 and all(len(rows) >= 2 for rows in polls.values()), {m: len(r) for m, r in polls.items()}
    fsync = max(float(row["FsyncP99Ms"]) for rows in polls.values() for row in rows[1:] if row["FsyncP99Ms"])
    changes = max(int(rows[-1]["LeaderChanges"]) - int(rows[0]["LeaderChanges"]) for rows in polls.values())
    for rows in polls.values():  # the session's cluster is never restarted: no counter goes back
        assert [int(row["LeaderChanges"]) for row in rows] == sorted(int(row["LeaderChanges"]) for row in rows)

    def growth(column: str) -> float:
        return max(int(rows[-1][column]) - int(rows[0][column]) for rows in polls.values()) / MB

    assert put["fsync P99 (ms)"] == f"{fsync:.3f}"
    assert int(put["leader changes"]) == changes
    assert put["RSS growth (MB)"] == f"{growth('RssBytes'):.1f}"
    assert put["db growth (MB)"] == f"{growth('DbSizeBytes'):.1f}"
    assert any("server columns from P_etcd_metrics.csv: 3 members" in line for line in lines), lines
