"""examples/: each locustfile runs as its docstring says, a few seconds against the session's etcd, and gives what a
reader of the example relies on: its request names counted, its levels run, its gate lines and exit code."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest
from checks import assert_no_traceback, stats_rows
from support import run_locust

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
GATE_LINE = re.compile(r"SLA (?P<gate>.+): .+ (?P<verdict>PASS|FAIL)")


def run_example(name: str, etcd, csv_prefix: Path, *args: str):
    """``locust -f examples/NAME.py --headless`` against ``etcd``, under a prefix of its own (the cluster is shared)."""
    result = run_locust(
        *("-f", f"examples/{name}.py", "--headless", "--only-summary", "--csv", str(csv_prefix)),
        *("--etcd-endpoints", ",".join(etcd.endpoints), "--etcd-prefix", f"/ex-{uuid.uuid4().hex[:8]}/"),
        *args,
    )
    assert_no_traceback(result.stdout + result.stderr)
    return result


def gate_lines(stderr: str) -> dict[str, str]:
    """Each printed gate → PASS or FAIL."""
    return {match["gate"]: match["verdict"] for match in map(GATE_LINE.fullmatch, stderr.splitlines()) if match}


def test_every_example_starts_with_the_command_that_runs_it():
    files = sorted(EXAMPLES.glob("*.py"))
    assert [path.name for path in files] == ["custom_shape.py", "custom_workload.py", "read_write_mix_with_gates.py"]
    for path in files:
        docstring = path.read_text().split('"""')[1]
        assert f"    locust -f examples/{path.name} " in docstring, path.name


def test_custom_workload_counts_its_own_request_names(etcd1, tmp_out):
    result = run_example("custom_workload", etcd1, tmp_out / "custom", "-u", "4", "-r", "4", "-t", "3s")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = stats_rows(tmp_out / "custom")
    assert sorted(rows) == ["read-back", "write"]  # no read-back/stale: one member reads what it wrote
    assert int(rows["write"]["Request Count"]) > 0 and int(rows["read-back"]["Request Count"]) > 0
    assert rows["write"]["Failure Count"] == rows["read-back"]["Failure Count"] == "0"


def test_custom_shape_runs_its_levels_and_stops(etcd1, tmp_out):
    # levels of 2 s (3 s × 0.67): two ticks or more each
    result = run_example("custom_shape", etcd1, tmp_out / "ramp", "--shape-time-scale", "0.67")
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((tmp_out / "ramp_shape.json").read_text())
    assert record["shape"] == "ShortRampShape"
    assert [(level["name"], level["users"], level["qps"]) for level in record["levels"]] == [
        ("ramp 1", 2, None),
        ("ramp 2", 4, None),
        ("ramp 3", 8, None),
    ]
    assert all(level["started_at"] is not None for level in record["levels"])
    for number in (1, 2, 3):
        assert f"shape: level {number}/3 'ramp {number}' at " in result.stderr
    assert "shape: plan complete" in result.stderr
    assert int(stats_rows(tmp_out / "ramp")["put"]["Request Count"]) > 0


def test_read_write_mix_judges_the_file_s_gates(etcd1, tmp_out):
    result = run_example("read_write_mix_with_gates", etcd1, tmp_out / "mix", "-u", "4", "-r", "4", "-t", "3s")
    gates = gate_lines(result.stderr)
    assert list(gates) == ["put p99 < 500ms", "range/serializable p99 < 500ms", "Aggregated errors < 1%"]
    # PASS or FAIL is this machine's latency; the exit code follows the verdicts either way
    assert result.returncode == (3 if "FAIL" in gates.values() else 0), result.stderr[-3000:]
    rows = stats_rows(tmp_out / "mix")
    assert sorted(rows) == ["put", "range/serializable"]
    assert all(int(row["Request Count"]) > 0 for row in rows.values())


def test_read_write_mix_gates_given_on_the_command_line_replace_the_file_s(etcd1, tmp_out):
    result = run_example(
        "read_write_mix_with_gates",
        etcd1,
        tmp_out / "mix",
        "-u",
        "2",
        "-r",
        "2",
        "-t",
        "2s",
        "--etcd-sla",
        "put:p99<1us",
    )
    assert gate_lines(result.stderr) == {"put p99 < 1us": "FAIL"}  # no put answers within a microsecond
    assert result.returncode == 3, result.stderr[-3000:]
