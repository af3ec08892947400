"""The server columns of ``python -m analysis`` from a real three-member run."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import headless_args, run_locust
from support import run_analysis as cli

from etcd_users.analysis.server import SERVER_COLUMNS

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
    assert float(put["fsync P99 (ms)"]) > 0
    assert int(put["leader changes"]) >= 0
    assert put["RSS growth (MB)"] != ""
    assert float(put["db growth (MB)"]) > 0
    assert any("server columns from P_etcd_metrics.csv: 3 members" in line for line in lines), lines
