"""The server's side at the breach (``--etcd-profile-on-breach``) against real members: a capture taken directly from
members with pprof, without it, down and frozen; then real Locust runs (a test-only trigger, and the live per-level
judging of a load shape) whose files ``python -m analysis`` lists beside the first breach."""

import argparse
import json
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import gevent
import pytest
from checks import refusal_line
from support import assert_one_line_error, free_port, run_analysis, run_locust, running

from etcd_users.core.features import OPTIONS
from etcd_users.features.monitoring.breach import member_directory, start_capture
from etcd_users.files import BREACH_CAPTURE, BREACH_FILES
from etcd_users.local import LocalCluster
from etcd_users.settings import settings_from_options

pytestmark = pytest.mark.e2e

GZIP_MAGIC = b"\x1f\x8b"
PPROF_KINDS = ("profile", "goroutine", "heap")


@pytest.fixture(scope="module")
def pprof_etcd1() -> Iterator[LocalCluster]:
    """A 1-member cluster started with --enable-pprof."""
    with running(LocalCluster(1, enable_pprof=True, name="locust-etcd-pprof")) as cluster:
        yield cluster


def settings_for(*endpoints: str, timeout: float = 1.0, seconds: float = 1.0):
    options = argparse.Namespace(**{option.dest: option.default for option in OPTIONS})
    options.etcd_endpoints = ",".join(endpoints)
    options.etcd_timeout = timeout
    options.etcd_profile_on_breach = seconds
    return settings_from_options(options), options


def assert_member_files(directory: Path) -> None:
    """The four files of a member with pprof, each what its tool reads."""
    profile, goroutine, heap, metrics = (directory / BREACH_FILES[kind] for kind in BREACH_FILES)
    assert profile.read_bytes()[:2] == GZIP_MAGIC  # go tool pprof's gzipped protobuf
    assert heap.read_bytes()[:2] == GZIP_MAGIC
    assert "goroutine " in goroutine.read_text()
    assert "etcd_server_has_leader" in metrics.read_text()
    assert not list(directory.glob("*.part"))


def test_a_capture_writes_each_member_s_files_in_the_background(pprof_etcd1, etcd1, tmp_path, caplog):
    """pprof on, pprof off (404), nothing listening, and a member that accepts and never answers (frozen): each
    costs at most its own files, the capture ends within its deadline and the hub never waits on it."""
    dead = f"http://127.0.0.1:{free_port()}"
    with socket.socket() as frozen_socket:
        frozen_socket.bind(("127.0.0.1", 0))
        frozen_socket.listen(16)  # the kernel completes connections; nothing ever reads or answers them
        frozen = f"http://127.0.0.1:{frozen_socket.getsockname()[1]}"
        live, no_pprof = pprof_etcd1.endpoints[0], etcd1.endpoints[0]
        settings, options = settings_for(live, no_pprof, dead, frozen)
        ticks = [time.monotonic()]

        def tick() -> None:  # stands for the users: the hub must keep switching to them
            while True:
                gevent.sleep(0.05)
                ticks.append(time.monotonic())

        ticker = gevent.spawn(tick)
        caplog.set_level(logging.INFO, logger="etcd_users.monitoring.breach")
        started = time.monotonic()
        capture = start_capture(str(tmp_path / "run"), settings, "put p99 above 0.001 ms at step 1")
        assert capture is not None and capture.running()  # started, not done: the caller goes on
        assert capture.wait(capture.deadline + 2.0)
        elapsed = time.monotonic() - started
        ticker.kill()
    assert 1.0 <= elapsed < capture.deadline + 1.0, elapsed  # the profile's second, not much more: nothing hung
    # the ticker ran all along: never held up for the profile's second, as a capture that blocked the hub would hold
    # it (a busy machine may delay a tick, not for that long)
    gaps = [later - earlier for earlier, later in zip(ticks, ticks[1:], strict=False)]
    assert len(ticks) > 2 and max(gaps) < 1.0, (len(ticks), max(gaps), elapsed)

    directory = tmp_path / "run_breach"
    assert_member_files(directory / member_directory(live))
    document = json.loads((directory / BREACH_CAPTURE).read_text())
    assert document["why"] == "put p99 above 0.001 ms at step 1" and document["profile_seconds"] == 1.0
    assert document["started"].endswith("Z") and document["finished"]
    members = document["members"]
    assert list(members) == [url.removeprefix("http://") for url in (live, no_pprof, dead, frozen)]
    name = member_directory(live)
    assert members[live.removeprefix("http://")] == {
        "directory": name,
        "files": {kind: f"{name}/{file}" for kind, file in BREACH_FILES.items()},
        "errors": {},
    }
    without = members[no_pprof.removeprefix("http://")]
    assert list(without["files"]) == ["metrics"]  # /metrics answers without pprof
    assert all(without["errors"][kind].startswith("HTTP 404") for kind in PPROF_KINDS)
    assert (directory / without["directory"] / BREACH_FILES["metrics"]).stat().st_size > 0
    for url in (dead, frozen):
        result = members[url.removeprefix("http://")]
        assert result["files"] == {} and set(result["errors"]) == set(BREACH_FILES), result
        assert not (directory / result["directory"]).exists() or not any((directory / result["directory"]).iterdir())
    assert "answer within" in members[frozen.removeprefix("http://")]["errors"]["goroutine"]

    hints = [record.getMessage() for record in caplog.records if "--enable-pprof" in record.getMessage()]
    assert hints == [
        f"breach capture: {no_pprof.removeprefix('http://')} has no /debug/pprof (HTTP 404): start etcd with "
        "--enable-pprof to get its profiles"
    ]


def test_analysis_lists_the_captured_files_beside_the_breach(pprof_etcd1, tmp_path):
    """From a capture's own capture.json; a run of one put from the gateway is enough for the analysis to load."""
    settings, options = settings_for(pprof_etcd1.endpoints[0])
    prefix = tmp_path / "run"
    capture = start_capture(str(prefix), settings, "put p99 25 ms at step 1")
    assert capture is not None and capture.wait(capture.deadline + 2.0)
    lines = _capture_lines(prefix)
    name = member_directory(pprof_etcd1.endpoints[0])
    assert lines[0].startswith("at the breach (put p99 25 ms at step 1; 20") and f"{prefix}_breach/:" in lines[0]
    assert lines[1] == f"- {pprof_etcd1.endpoints[0].removeprefix('http://')}: " + ", ".join(
        f"{name}/{file}" for file in BREACH_FILES.values()
    )


def _capture_lines(prefix: Path) -> list[str]:
    from etcd_users.analysis.breach import capture_lines

    return capture_lines(str(prefix))


# -- real runs ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_run_that_breaches_captures_once_and_the_analysis_lists_the_files(tmp_out):
    """The local etcd started with --etcd-local-pprof; the test locustfile calls on_breach twice a second in."""
    prefix = tmp_out / "run"
    args = ("-f", "tests/locustfiles/breach_trigger.py", "--headless", "--only-summary", "-u", "2", "-r", "2")
    result = run_locust(
        *args,
        *("-t", "4s", "--csv", str(prefix), "--etcd-local-pprof", "--etcd-profile-on-breach", "1"),
        *("--etcd-prefix", "/test-breach/", "--etcd-cleanup"),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.count("breach capture: test trigger") == 1, result.stderr[-3000:]  # once per run
    document = json.loads((tmp_out / "run_breach" / BREACH_CAPTURE).read_text())
    assert document["why"] == "test trigger: put p99 above 0.001 ms" and document["finished"]
    [(member, files)] = document["members"].items()
    assert files["errors"] == {} and len(files["files"]) == len(BREACH_FILES)
    assert_member_files(tmp_out / "run_breach" / files["directory"])

    analysis = run_analysis(prefix)
    assert analysis.returncode == 0, analysis.stderr
    assert "at the breach (test trigger: put p99 above 0.001 ms;" in analysis.stdout
    assert f"- {member}: {files['directory']}/{BREACH_FILES['profile']}, " in analysis.stdout


@pytest.mark.slow
def test_without_csv_one_line_says_nothing_is_captured(etcd1):
    result = run_locust(
        *("-f", "tests/locustfiles/breach_trigger.py", "--headless", "--only-summary", "-u", "1", "-r", "1"),
        *("-t", "2s", "--etcd-endpoints", etcd1.endpoints[0], "--etcd-profile-on-breach", "1"),
        *("--etcd-prefix", "/test-no-csv/", "--etcd-cleanup"),
        timeout=90,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if "capture" in line]
    assert len(lines) == 1 and "nothing is captured without --csv PREFIX" in lines[0], lines


@pytest.mark.parametrize(
    "value, message",
    [
        ("-1", "--etcd-profile-on-breach: -1.0 must be zero or more"),
        ("nan", "--etcd-profile-on-breach: nan is not a finite number"),
        ("301", "--etcd-profile-on-breach: 301.0 seconds is too long a profile; give at most 300"),
        ("soon", "--etcd-profile-on-breach: 'soon' is not a number"),
    ],
)
def test_a_bad_value_is_one_line(value, message):
    result = run_locust(
        *("--headless", "-f", "locustfile.py", "-u", "1", "-t", "1s", "--etcd-profile-on-breach", value),
        "EtcdPutUser",
        timeout=60,
    )
    if value == "soon":  # argparse's own type check: before Locust logs anything
        assert_one_line_error(result, f"locust-etcd: error: {message}")
    else:  # checked with the other options when Locust starts, after its first log line
        assert refusal_line(result).startswith(f"locust-etcd: error: {message}")


# 20 QPS for 3 s, 40 QPS for 3 s, a 60 QPS spike for 2 s: light, and no put answers within a microsecond
SHORT_STEPS = (
    "--etcd-user-rate", "10", "--etcd-key-space-size", "100",
    "--shape-baseline-qps", "20", "--shape-baseline-time", "3",
    "--shape-step-qps", "20", "--shape-step-time", "3", "--shape-max-qps", "40",
    "--shape-spike-qps", "60", "--shape-spike-time", "2",
)  # fmt: skip


@pytest.mark.slow
def test_the_first_failed_level_of_a_shape_run_captures_the_members(pprof_etcd1, tmp_out):
    prefix = tmp_out / "steps"
    result = run_locust(
        "-f", "locustfile.py,shapes/step_spike.py", "--headless", "--only-summary", "--csv", str(prefix),
        "--etcd-endpoints", ",".join(pprof_etcd1.endpoints), "--etcd-prefix", "/test-breach-steps/",
        "--etcd-cleanup", *SHORT_STEPS, "--etcd-sla", "put:p99<0.001ms", "--etcd-profile-on-breach", "1",
        "EtcdPutUser",
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 3, result.stderr[-3000:]  # the impossible gate fails the run too
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    starts = [line for line in result.stderr.splitlines() if "breach capture:" in line and "profiling" in line]
    assert len(starts) == 1, starts  # the first failed level only
    document = json.loads((tmp_out / "steps_breach" / BREACH_CAPTURE).read_text())
    assert "put" in document["why"] and document["finished"], document
    [(member, files)] = document["members"].items()
    assert files["errors"] == {}, files
    assert_member_files(tmp_out / "steps_breach" / files["directory"])

    analysis = run_analysis(prefix)
    assert analysis.returncode == 0, analysis.stderr
    lines = analysis.stdout.splitlines()
    breach_line = next(index for index, line in enumerate(lines) if "first breach at" in line)
    assert lines[breach_line + 2].startswith("at the breach ("), lines[breach_line:]
    assert lines[breach_line + 3].startswith(f"- {member}: {files['directory']}/{BREACH_FILES['profile']}, ")
