"""``python -m analysis compare`` on real runs against a one-member etcd: runs of the same settings never exit 3 (one
run a side without a calibration, within a calibration of the machine's A/A runs, two repeats a side); 512 KiB values
against 1 KiB are inconclusive from one run a side alone and worse with exit status 3 beyond the calibrated noise, or
said the same where this machine's other work makes its runs' noise larger than the change; different key sizes print
the unfair line first (from the runs' PREFIX_summary.json)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import started_cluster
from support import HEADLESS, run_analysis, run_locust

from etcd_users.analysis.compare_load import LOAD_GAP_PCT, mean_wait
from etcd_users.analysis.load import load_run
from etcd_users.local import LocalCluster

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SECONDS = 6
# a fixed rate well below what the member and Locust manage (40 puts/s), so that neither side is client-bound and the
# big values' megabytes a second stay small
USERS, RATE = 4, "10"
BIG = 512 * 1024


def put_run(endpoint: str, prefix: Path, value_size: int = 1024, key_size: int = 32) -> str:
    result = run_locust(
        *HEADLESS,
        *("-u", str(USERS), "-r", str(USERS), "-t", f"{SECONDS}s", "--csv", str(prefix), "--etcd-user-rate", RATE),
        *("--etcd-endpoints", endpoint, "--etcd-prefix", f"/compare-e2e/{prefix.name}/", "--etcd-cleanup"),
        *("--etcd-val-size", str(value_size), "--etcd-key-size", str(key_size), "--etcd-skip-preflight"),
        "EtcdPutUser",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return str(prefix)


@pytest.fixture(scope="module")
def etcd_without_fsync() -> Iterator[LocalCluster]:
    """A member whose puts wait for no disk: this machine's fsync, which moves a small put's median two- to three-fold
    between runs, would hide what the value's size does to it."""
    with started_cluster(1, name="compare", extra_args=("--unsafe-no-fsync",)) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def runs(etcd_without_fsync, tmp_path_factory) -> dict[str, str]:
    """Two repeats per side of the same settings, interleaved so that the machine's load falls on both alike, and
    one run with 512 KiB values and 48-byte keys."""
    out = tmp_path_factory.mktemp("compare")
    endpoint = etcd_without_fsync.endpoints[0]
    found = {name: put_run(endpoint, out / name) for name in ("a1", "b1", "a2", "b2")}
    found["big"] = put_run(endpoint, out / "big", value_size=BIG, key_size=48)
    return found


def rows(out: Path) -> list[dict]:
    return json.loads((out / "compare.json").read_text())["rows"]


@pytest.fixture(scope="module")
def noise(runs, tmp_path_factory) -> Path:
    """The machine's run-to-run noise from the four A/A runs."""
    path = tmp_path_factory.mktemp("noise") / "noise.json"
    aa = ",".join(runs[name] for name in ("a1", "b1", "a2", "b2"))
    result = run_analysis("calibrate", aa, "--out", path)
    assert result.returncode == 0, result.stdout + result.stderr
    return path


def test_two_repeats_a_side_of_the_same_settings_are_not_worse_and_say_what_they_could_detect(runs, tmp_path: Path):
    result = run_analysis("compare", f"{runs['a1']},{runs['a2']}", f"{runs['b1']},{runs['b2']}", "--out", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    found = rows(tmp_path)
    assert [row["metric"] for row in found] == ["qps", "p50", "p99", "p99.9", "errors"]
    assert {row["method"] for row in found} == {"repeats"}
    assert "worse" not in {row["verdict"] for row in found}, result.stdout
    # two runs a side cannot reach a 95 % rank interval: nothing could have been detected, and it says so
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("could have detected")]
    assert line.startswith("could have detected (put, 2 vs 2 runs): qps none (too few runs"), line


def test_one_run_a_side_of_the_same_settings_never_exits_3_without_a_calibration(runs, tmp_path: Path):
    for baseline, candidate in (("a1", "b1"), ("b2", "a2")):
        result = run_analysis("compare", runs[baseline], runs[candidate], "--out", tmp_path / baseline)
        assert result.returncode == 0, result.stdout + result.stderr
        assert {row["noise"] for row in rows(tmp_path / baseline) if row["verdict"] != "n/a"} == {"drift"}


def test_one_run_a_side_of_the_same_settings_is_within_the_calibrated_noise(runs, noise, tmp_path: Path):
    result = run_analysis("compare", runs["a1"], runs["b2"], "--noise", noise, "--out", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert {row["noise"] for row in rows(tmp_path)} == {"calibrated"}


def test_big_values_one_run_a_side_are_inconclusive_without_a_calibration(runs, tmp_path: Path):
    result = run_analysis(
        "compare", runs["a1"], runs["big"], "--changed", "etcd-val-size,etcd-key-size", "--out", tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    last = result.stdout.splitlines()[-1]
    (p50,) = [row for row in rows(tmp_path) if row["metric"] == "p50"]
    assert p50["noise"] == "drift" and "worse" not in {row["verdict"] for row in rows(tmp_path)}, result.stdout
    if p50["low"] <= p50["tolerance"]:  # a machine whose other work moved a run's halves apart: its drift hides it
        assert p50["verdict"] == "same" and last == "No regression: 5 row(s) compared, none worse.", result.stdout
        return
    assert p50["verdict"] == "inconclusive" and p50["decide_runs"] > 1, p50
    assert last.startswith("inconclusive: one run a side: ") and "runs a side would decide" in last, last


def test_big_values_compare_worse_with_exit_status_3_beyond_the_calibrated_noise(runs, noise, tmp_path: Path):
    # the A/A run that ran under the machine load most like the big run's (a calibration vouches for like load only)
    wait = {name: mean_wait([load_run(runs[name])]) or 0.0 for name in ("a1", "b1", "a2", "b2", "big")}
    baseline = min(("a1", "b1", "a2", "b2"), key=lambda name: abs(wait[name] - wait["big"]))
    result = run_analysis(
        "compare", runs[baseline], runs["big"], "--noise", noise, "--out", tmp_path, "--changed", "etcd-val-size"
    )
    last = result.stdout.splitlines()[-1]
    if abs(wait[baseline] - wait["big"]) >= LOAD_GAP_PCT:  # the machine's other work differed whichever run
        assert result.returncode == 0 and "machine load:" in result.stdout, result.stdout
        assert last.startswith("inconclusive: one run a side under different machine load"), last
        return
    # each put carries 512 times the bytes: its median grows, on a quiet machine several-fold, beyond what four A/A runs
    # of this machine moved by (their spread, with Student's t at 3 degrees of freedom)
    (p50,) = [row for row in rows(tmp_path) if row["metric"] == "p50"]
    assert p50["difference"] > p50["tolerance"], result.stdout
    if p50["difference"] < p50["detectable"]:  # a machine loaded by other work: its A/A runs spread wider than that
        assert result.returncode == 0 and p50["verdict"] == "same", result.stdout
        (line,) = [line for line in result.stdout.splitlines() if line.startswith("could have detected (put")]
        assert f", p50 {p50['detectable']:+.1f}%," in line, line  # the user is told what this noise could see
        return
    assert result.returncode == 3, result.stdout + result.stderr
    worse = {row["metric"]: row for row in rows(tmp_path) if row["verdict"] == "worse"}
    assert "p50" in worse, result.stdout
    assert all(row["detectable"] is not None for row in worse.values())
    assert "REGRESSION" in last


def test_different_key_sizes_print_the_unfair_line_first(runs, tmp_path: Path):
    result = run_analysis("compare", runs["a1"], runs["big"], "--changed", "etcd-val-size")
    # a client-bound side would add its own line (a loaded machine): the options' differences are the key size only
    differs = [line for line in result.stdout.splitlines() if " differs: " in line]
    assert differs == ["unfair: etcd_key_size differs: baseline 32, candidate 48 (not in --changed)."], result.stdout
    assert result.stdout.splitlines()[0] == differs[0]
