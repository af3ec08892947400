"""``python -m analysis compare`` on real runs against the shared one-member etcd: repeats of the same settings
compare ``same``, 64 KiB values against 1 KiB compare ``worse`` with exit status 3, different key sizes print the
unfair line first (from the runs' PREFIX_summary.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import HEADLESS, run_analysis, run_locust

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SECONDS = 6


def put_run(endpoint: str, prefix: Path, value_size: int = 1024, key_size: int = 32) -> str:
    result = run_locust(
        *HEADLESS,
        *("-u", "8", "-r", "8", "-t", f"{SECONDS}s", "--csv", str(prefix)),
        *("--etcd-endpoints", endpoint, "--etcd-prefix", f"/compare-e2e/{prefix.name}/", "--etcd-cleanup"),
        *("--etcd-val-size", str(value_size), "--etcd-key-size", str(key_size), "--etcd-skip-preflight"),
        "EtcdPutUser",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return str(prefix)


@pytest.fixture(scope="module")
def runs(etcd1, tmp_path_factory) -> dict[str, str]:
    """Two repeats per side of the same settings, interleaved so that the machine's load falls on both alike, and
    one run with 64 KiB values and 48-byte keys."""
    out = tmp_path_factory.mktemp("compare")
    endpoint = etcd1.endpoints[0]
    found = {name: put_run(endpoint, out / name) for name in ("a1", "b1", "a2", "b2")}
    found["big"] = put_run(endpoint, out / "big", value_size=65536, key_size=48)
    return found


def rows(out: Path) -> list[dict]:
    return json.loads((out / "compare.json").read_text())["rows"]


def test_repeats_of_the_same_settings_compare_same_on_every_row(runs, tmp_path: Path):
    result = run_analysis("compare", f"{runs['a1']},{runs['a2']}", f"{runs['b1']},{runs['b2']}", "--out", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    found = rows(tmp_path)
    assert [row["metric"] for row in found] == ["qps", "p50", "p99", "p99.9", "errors"]
    assert {row["verdict"] for row in found} == {"same"}, result.stdout
    assert {row["method"] for row in found} == {"repeats"}


def test_sixty_four_kib_values_compare_worse_with_exit_status_3(runs, tmp_path: Path):
    result = run_analysis("compare", runs["a1"], runs["big"], "--out", tmp_path, "--changed", "etcd-val-size")
    assert result.returncode == 3, result.stdout + result.stderr
    p50 = next(row for row in rows(tmp_path) if row["metric"] == "p50")
    # each put carries 64 times the bytes: its median doubles or more (+104 %, interval [+71 %, +122 %], with other
    # work on a 2-core VM), so the whole interval lies beyond the tolerance of +15 %; the tail is the machine's own
    assert p50["verdict"] == "worse" and p50["low"] > 15, result.stdout
    assert "REGRESSION" in result.stdout


def test_different_key_sizes_print_the_unfair_line_first(runs, tmp_path: Path):
    result = run_analysis("compare", runs["a1"], runs["big"], "--changed", "etcd-val-size")
    # a client-bound side would add its own line (a loaded machine): the options' differences are the key size only
    differs = [line for line in result.stdout.splitlines() if " differs: " in line]
    assert differs == ["unfair: etcd_key_size differs: baseline 32, candidate 48 (not in --changed)."], result.stdout
    assert result.stdout.splitlines()[0] == differs[0]
