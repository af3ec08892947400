"""The server columns, the members' chart and ``python -m analysis memory`` against runs whose answers are known.

tests/fixtures/analysis_server/three_members_etcd_metrics.csv belongs to the three_members run of
tests/fixtures/analysis (T0 = 1700000000): 3 members polled at T0+t+0.25 s for t = 0..10.

- A (:2379) leads for t = 2..5; LeaderChanges 1, 2 from t=2, 3 from t=6; RSS 40 MB + 1 MB/poll; db 1 MB + 0.2 MB/poll;
  fsync P99 2 ms per interval, except 20 ms in the interval that ends at t=4.
- B (:22379) restarts between t=4 and t=5: CpuSeconds, LeaderChanges (4 -> 1) and ProposalsFailed go back; RSS
  50 MB + 2 MB/poll, then 30 MB + 1 MB/poll; db 1 MB + 0.21 MB/poll; fsync 3 ms.
- C (:32379) leads at t = 0..1 and from t=6; it does not answer at t=7 and t=8; LeaderChanges 1, 2, 3 like A;
  RSS 45 MB + 1.5 MB/poll; db 1 MB + 0.19 MB/poll; fsync 2.5 ms, 9 ms in the interval ending at t=9 (after the gap).

Whole run: fsync 20 ms (A, t=4); leader changes 2 (each member saw 2; B's restart adds none; a sum would say 6);
RSS growth 15 MB (C; B's last minus first is -15 MB); db growth 2.1 MB (B).
With --warmup=4 (the polls from t=4 on, t=4 being each member's baseline): fsync 9 ms (C, t=9: A's 20 ms interval
ended at t=4), leader changes 1, RSS growth 9 MB (C: 51 -> 60), db growth 1.26 MB (B).
"""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support import assert_one_line_error
from support import run_analysis as cli

from etcd_users.analysis.load import load_run
from etcd_users.analysis.measure import measure_run
from etcd_users.analysis.memory_model import KEYS, WATCH, load_points, memory_report
from etcd_users.analysis.server import SERVER_COLUMNS, add_server_columns
from etcd_users.analysis.tables import comparison_table

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
T0 = 1_700_000_000
SERVER_HEADER = "| fsync P99 (ms) | leader changes | RSS growth (MB) | db growth (MB) |"
METRICS_COLUMNS = (
    "Timestamp,Member,IsLeader,HasLeader,LeaderChanges,ProposalsCommitted,ProposalsApplied,ProposalsPending,"
    "ProposalsFailed,DbSizeBytes,DbSizeInUseBytes,QuotaBytes,RssBytes,CpuSeconds,FsyncP99Ms,BackendCommitP99Ms,"
    "GrpcRequests,Keys,WatchStreams,Watchers,Error"
).split(",")


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """The analysis fixtures with the server fixtures beside them."""
    directory = tmp_path / "runs"
    shutil.copytree(FIXTURES / "analysis", directory)
    for path in (FIXTURES / "analysis_server").iterdir():
        shutil.copy(path, directory / path.name)
    return directory


def server_table(runs_dir: Path, *prefixes: str, **options) -> tuple[pd.DataFrame, list[str]]:
    measured = [measure_run(load_run(str(runs_dir / prefix)), **options) for prefix in prefixes]
    return add_server_columns(comparison_table(measured), measured)


def server_cells(table: pd.DataFrame, run: str) -> list[tuple]:
    """The server columns of each of the run's rows."""
    rows = table[table["run"] == run]
    return [tuple(None if pd.isna(value) else value for value in row) for row in rows[list(SERVER_COLUMNS)].values]


# --- server columns -----------------------------------------------------------------------------------------------


def test_whole_run_figures_on_every_row_of_the_run(runs: Path) -> None:
    table, notes = server_table(runs, "three_members")
    cells = server_cells(table, "three_members")
    assert len(cells) == 3  # put, range/serializable, Aggregated
    for fsync, leader_changes, rss, db in cells:
        assert fsync == 20.0
        assert leader_changes == 2
        assert rss == pytest.approx(15.0)
        assert db == pytest.approx(2.1)
    assert any(
        "three_members: server columns from three_members_etcd_metrics.csv: 3 members, 11 polls from +0.2 s to "
        "+10.2 s (whole run)" in note
        for note in notes
    ), notes


def test_restart_and_unanswered_polls_are_noted(runs: Path) -> None:
    _, notes = server_table(runs, "three_members")
    assert any(
        "http://127.0.0.1:22379 restarted before the poll at +5.2 s" in note for note in notes
    ), notes  # fmt: skip
    assert any(
        "http://127.0.0.1:32379 did not answer 2 of 11 polls (first at +7.2 s: no answer within 1s)" in note
        for note in notes
    ), notes


def test_warmup_cut_keeps_the_polls_after_it(runs: Path) -> None:
    table, notes = server_table(runs, "three_members", warmup=4.0)
    fsync, leader_changes, rss, db = server_cells(table, "three_members")[0]
    assert fsync == 9.0
    assert leader_changes == 1
    assert rss == pytest.approx(9.0)
    assert db == pytest.approx(1.26)
    assert any("7 polls from +4.2 s to +10.2 s (after the warm-up cut at +4 s)" in note for note in notes), notes


def test_a_run_without_the_file_gets_empty_cells_and_a_note(runs: Path) -> None:
    table, notes = server_table(runs, "one_member", "three_members")
    assert set(server_cells(table, "one_member")) == {(None, None, None, None)}
    assert server_cells(table, "three_members")[0] == (20.0, 2, pytest.approx(15.0), pytest.approx(2.1))
    assert any(note.startswith("one_member: no one_member_etcd_metrics.csv") for note in notes), notes


def test_no_server_columns_when_no_run_has_the_file(runs: Path) -> None:
    table, notes = server_table(runs, "one_member")
    assert not set(SERVER_COLUMNS) & set(table.columns)
    assert notes == []


def test_a_file_with_only_its_header_gives_empty_cells(runs: Path) -> None:
    (runs / "three_members_etcd_metrics.csv").write_text(",".join(METRICS_COLUMNS) + "\n", encoding="utf-8")
    table, notes = server_table(runs, "three_members")
    assert set(server_cells(table, "three_members")) == {(None, None, None, None)}
    assert any("has no answered poll" in note for note in notes), notes


def test_cli_table_csv_markdown_html_and_chart(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = cli(runs / "one_member", runs / "three_members", "--out", out)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "Warning" not in result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith("| source " + SERVER_HEADER)
    assert "| three_members | put | 4000 | 400.0 |" in lines[5]
    assert lines[5].endswith("| exact | 20.000 | 2 | 15.0 | 2.1 |")
    assert lines[2].endswith("| exact |  |  |  |  |")  # one_member put: no file
    assert lines[7].startswith("| three_members | Aggregated |") and lines[7].endswith("| 20.000 | 2 | 15.0 | 2.1 |")

    csv = pd.read_csv(out / "comparison.csv")
    put = csv[(csv["run"] == "three_members") & (csv["name"] == "put")].iloc[0]
    assert (put["fsync P99 (ms)"], put["leader changes"], put["RSS growth (MB)"], put["db growth (MB)"]) == (
        20.0,
        2,
        15.0,
        2.1,
    )
    assert csv.loc[csv["run"] == "one_member", list(SERVER_COLUMNS)].isna().all().all()
    markdown = (out / "comparison.md").read_text(encoding="utf-8")
    assert SERVER_HEADER in markdown and "server columns from three_members_etcd_metrics.csv" in markdown
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<th>fsync P99 (ms)</th><th>leader changes</th><th>RSS growth (MB)</th><th>db growth (MB)</th>" in page
    assert '<td class="num">20.000</td><td class="num">2</td><td class="num">15.0</td><td class="num">2.1</td>' in page
    # four charts over time and bars, and one_member's chart per level (it has a shape record)
    assert page.count("<svg") == 5 and "http://" not in page.replace("http://127.0.0.1", "")

    assert (out / "server_metrics.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    root = ElementTree.parse(out / "server_metrics.svg").getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert len(list(root.iter())) > 200  # four panels of lines, the legend, the leader-change verticals


def test_no_members_chart_without_the_file(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    assert cli(runs / "one_member", "--out", out).returncode == 0
    assert not (out / "server_metrics.png").exists()


def test_warmup_on_the_command_line(runs: Path) -> None:
    result = cli(runs / "three_members", "--warmup=4", "--names", "put")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[2].endswith("| 9.000 | 1 | 9.0 | 1.3 |")


def test_a_foreign_metrics_file_is_a_one_line_error(runs: Path) -> None:
    (runs / "three_members_etcd_metrics.csv").write_text("time,rss\n1,2\n", encoding="utf-8")
    result = cli(runs / "three_members")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "three_members_etcd_metrics.csv was not written by this tool's server metrics poller" in result.stderr


# --- memory model -------------------------------------------------------------------------------------------------


def write_metrics(path: Path, columns: dict[str, list], members: int = 3) -> None:
    """A metrics file with the same series for every member (plus the given columns), the rest of the row filled."""
    polls = len(next(iter(columns.values())))
    rows = []
    for poll in range(polls):
        for member in range(members):
            row = dict.fromkeys(METRICS_COLUMNS, "")
            row.update(
                Timestamp=T0 + poll,
                Member=f"http://127.0.0.1:{2379 + 10000 * member}",
                IsLeader=int(member == 0),
                LeaderChanges=1,
                CpuSeconds=1 + poll / 10,
                ProposalsCommitted=columns.get("ProposalsApplied", [0] * polls)[poll],
                DbSizeBytes=1_000_000,
            )
            row.update({column: values[poll] for column, values in columns.items()})
            if isinstance(row["RssBytes"], list):
                row["RssBytes"] = row["RssBytes"][member]
            rows.append(row)
    later = [column for column in columns if column not in METRICS_COLUMNS]  # e.g. OpenFds
    pd.DataFrame(rows, columns=[*METRICS_COLUMNS, *later]).to_csv(path, index=False)


def keys_series(polls: int = 120, noise: float = 100_000.0, seed: int = 7) -> dict[str, list]:
    """Keys created in 10 steps of 20 000 over the first 60 polls, then overwritten (revisions go on growing);
    RSS = 50 MB + 120 B/key + 30 B/revision + normal noise of ``noise`` bytes, drawn per member."""
    rng = np.random.default_rng(seed)
    keys = [min(poll // 6 + 1, 10) * 20_000 if poll else 0 for poll in range(polls)]
    revisions = [1_000 + 4_000 * poll for poll in range(polls)]
    rss = [
        [round(50_000_000 + 120 * k + 30 * r + rng.normal(0, noise)) for _ in range(3)]
        for k, r in zip(keys, revisions, strict=True)
    ]
    return {"Keys": keys, "ProposalsApplied": revisions, "RssBytes": rss}


def test_memory_fit_recovers_known_coefficients(tmp_path: Path) -> None:
    write_metrics(tmp_path / "keys_etcd_metrics.csv", keys_series())
    report = memory_report([str(tmp_path / "keys")], ["keys"])
    assert report.model is KEYS
    pooled = report.table.iloc[0]
    assert pooled["fit"] == "all 3 member series" and pooled["polls"] == 360
    assert pooled["c1 (B/key)"] == pytest.approx(120, rel=0.03)
    assert pooled["c2 (B/revision)"] == pytest.approx(30, rel=0.03)
    assert pooled["base (MB)"] == pytest.approx(50, abs=0.5)
    assert 0 < pooled["c1 SE (B)"] < 6 and 0 < pooled["c2 SE (B)"] < 1.5
    assert pooled["R²"] > 0.99
    assert len(report.table) == 5  # pooled, one per member, the document's figures
    document = report.table.iloc[-1]
    assert (document["fit"], document["c1 (B/key)"], document["c2 (B/revision)"]) == ("source document", 120, 30)


def test_memory_command_prints_and_writes(tmp_path: Path) -> None:
    write_metrics(tmp_path / "keys_etcd_metrics.csv", keys_series())
    out = tmp_path / "memory"
    result = cli("memory", tmp_path / "keys", "--out", out)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "Warning" not in result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("etcd memory model (keys): RSS ≈ base + c1·keys + c2·revisions")
    assert lines[2] == (
        "| fit | polls | base (MB) | c1 (B/key) | c1 SE (B) | c2 (B/revision) | c2 SE (B) | R² |"
    )  # fmt: skip
    assert "| source document |  |  | 120.0 |  | 30.0 |  |  |" in lines
    written = pd.read_csv(out / "memory.csv")
    assert written["c1 (B/key)"].iloc[0] == pytest.approx(120, rel=0.03)
    assert (out / "memory.md").read_text(encoding="utf-8").startswith("# etcd memory model (keys)")


def test_memory_watch_model_from_two_runs(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    for name, per_stream in (("watch1", 1), ("watch20", 20)):
        streams = [50 * (1 + poll // 10) for poll in range(40)]
        watchers = [s * per_stream for s in streams]
        rss = [
            [round(60_000_000 + 18_432 * s + 350 * w + rng.normal(0, 20_000)) for _ in range(3)]
            for s, w in zip(streams, watchers, strict=True)
        ]
        columns = {"WatchStreams": streams, "Watchers": watchers, "RssBytes": rss, "Keys": [50] * 40}
        columns["ProposalsApplied"] = [100 + poll for poll in range(40)]
        write_metrics(tmp_path / f"{name}_etcd_metrics.csv", columns)
    report = memory_report([str(tmp_path / "watch1"), str(tmp_path / "watch20")], ["1", "20"])
    assert report.model is WATCH
    pooled = report.table.iloc[0]
    assert pooled["c_stream (B/stream)"] == pytest.approx(18_432, rel=0.03)
    assert pooled["c_watcher (B/watcher)"] == pytest.approx(350, rel=0.03)
    # the watch users' puts grow the revisions: fitted beside, so that they are not put on the watchers
    assert "c2 (B/revision)" in report.table.columns
    # alone, each run moves streams and watchers in proportion: no fit of its own
    assert any("no fit of its own" in note and "moved together" in note for note in report.notes)


def test_memory_constant_key_count_is_a_one_line_error(tmp_path: Path) -> None:
    series = keys_series()
    series["Keys"] = [20_000] * len(series["Keys"])
    write_metrics(tmp_path / "flat_etcd_metrics.csv", series)
    assert_one_line_error(
        cli("memory", tmp_path / "flat"),
        "python -m analysis: error: not enough variation to fit RSS ≈ base + c1·keys + c2·revisions",
        "keys do not vary within any member's run (constant at 20000)",
    )


def test_memory_keys_in_lockstep_with_revisions_is_a_one_line_error(tmp_path: Path) -> None:
    series = keys_series()
    series["Keys"] = [r - 1_000 for r in series["ProposalsApplied"]]
    write_metrics(tmp_path / "lockstep_etcd_metrics.csv", series)
    assert_one_line_error(
        cli("memory", tmp_path / "lockstep"), "keys and revisions moved together (correlation 1.0000)", "see --help"
    )


def test_memory_without_the_metrics_file(runs: Path) -> None:
    assert_one_line_error(cli("memory", runs / "one_member"), "no ", "one_member_etcd_metrics.csv")


def test_memory_keys_from_counted_puts_when_keys_is_empty(runs: Path) -> None:
    metrics = pd.read_csv(runs / "three_members_etcd_metrics.csv")
    metrics["Keys"] = float("nan")
    metrics.to_csv(runs / "three_members_etcd_metrics.csv", index=False)
    notes: list[str] = []
    points = load_points(str(runs / "three_members"), "three_members", notes)
    # successful puts of the seconds that had ended by each poll: 400 a second, 2 failed at T0+3 and 6 at T0+7
    first_member = points[points["member"] == "http://127.0.0.1:2379"]
    assert first_member["keys"].tolist() == [0, 400, 800, 1200, 1598, 1998, 2398, 2798, 3192, 3592, 3992]
    assert any("keys = successful puts so far" in note for note in notes)


def test_memory_watch_model_fits_connections_when_they_grow_within_a_run(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    # users on their own connections: connections, streams and watchers grow together, in other proportions per run
    for name, streams_per_user, per_stream in (("s10w10", 10, 10), ("s10w1", 10, 1), ("s1w10", 1, 10)):
        users = [1_000 * (1 + poll // 10) for poll in range(40)]
        streams = [u * streams_per_user for u in users]
        watchers = [s * per_stream for s in streams]
        rss = [
            [round(60_000_000 + 17_408 * u + 18_432 * s + 350 * w + rng.normal(0, 200_000)) for _ in range(3)]
            for u, s, w in zip(users, streams, watchers, strict=True)
        ]
        columns = {"WatchStreams": streams, "Watchers": watchers, "RssBytes": rss, "OpenFds": [u + 30 for u in users]}
        columns |= {"Keys": [50] * 40, "ProposalsApplied": [100] * 40}
        write_metrics(tmp_path / f"{name}_etcd_metrics.csv", columns)
    names = ["s10w10", "s10w1", "s1w10"]
    report = memory_report([str(tmp_path / name) for name in names], names, "watch")
    assert report.model is WATCH and "+ c_conn·connections," in report.title
    pooled = report.table.iloc[0]
    assert pooled["c_conn (B/connection)"] == pytest.approx(17_408, rel=0.05)
    assert pooled["c_stream (B/stream)"] == pytest.approx(18_432, rel=0.05)
    assert pooled["c_watcher (B/watcher)"] == pytest.approx(350, rel=0.05)
    assert report.table.iloc[-1]["c_conn (B/connection)"] == 17 * 1024
    assert any(note.startswith("connections = OpenFds") for note in report.notes)
