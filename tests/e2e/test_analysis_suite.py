"""``python -m analysis suite`` over a small suite of real Locust runs made by ``python -m etcd_users.suite``."""

from __future__ import annotations

import pandas as pd
import pytest
from support import run_analysis as cli

pytestmark = pytest.mark.e2e


# --- a real suite -------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_real_small_suite_end_to_end(small_suite) -> None:
    out, run = small_suite
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = cli("suite", out)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "Warning" not in result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("| users | user_class | name | QPS | P50 (ms) |")
    table = lines[: lines.index("")] if "" in lines else lines  # notes follow the table after a blank line
    rows = [line.split(" | ") for line in table[2:]]
    assert [(row[0], row[1]) for row in rows] == [
        ("| 2", "EtcdPutUser"),
        ("| 2", "SerializableRangeUser"),
        ("| 4", "EtcdPutUser"),
        ("| 4", "SerializableRangeUser"),
    ]
    for row in rows:
        # QPS to error %: "mean ± sd" with both filled; then n = 2 repeats
        for cell in row[3:9]:
            mean, _, spread = cell.partition(" ± ")
            float(mean), float(spread)
        assert row[9] == "2"
    csv = pd.read_csv(out / "analysis" / "suite.csv")
    assert len(csv) == 4 and list(csv["n"]) == [2, 2, 2, 2]
    assert csv[["QPS", "QPS ±", "P90 (ms)", "P90 ±", "P99 (ms)", "P99 ±"]].notna().all().all()
    assert (csv["QPS"] > 0).all()
