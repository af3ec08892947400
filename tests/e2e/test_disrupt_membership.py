"""Membership changes under load: on the tool's own etcd of three members (behind the peer proxy), a learner added,
caught up, promoted, and a follower removed; each process's pool follows (the new member takes reads once voting, the
removed one none) and the audit compares the members present at the end, the new one included. A learner added in a
zone and never promoted is removed when the run stops. On a cluster the tool
did not start, remove goes through the Cluster API with --etcd-disrupt-allowed, as etcdctl then sees; refusals are one
line."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path

import pytest
from checks import assert_no_traceback, refusal_line
from support import HEADLESS, headless_args, run_locust

from benchmarks.divergence import etcdctl_path
from etcd_users.local import find_etcd_binary

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SCHEDULE = "add-learner@2s,promote@8s,remove:follower@12s"


def _windows(prefix: Path) -> dict[str, dict]:
    windows = json.loads(Path(f"{prefix}_disruptions.json").read_text())["windows"]
    return {window["action"]: window for window in windows}


def test_a_learner_added_promoted_and_a_follower_removed_under_load_leave_the_pool_and_the_audit_on_the_members(
    tmp_out,
):
    prefix = tmp_out / "run"
    result = run_locust(
        *HEADLESS,
        *("-u", "8", "-r", "8", "-t", "18s", "--csv", str(prefix), "--etcd-local-members", "3"),
        *("--etcd-local-peer-rtt", "2ms", "--etcd-target", "round-robin", "--etcd-user-rate", "20"),
        *("--etcd-mix", "put:50,range/serializable:50", "--etcd-key-space-size", "50"),
        *("--etcd-disrupt", SCHEDULE, "--exit-code-on-error", "0", "EtcdMixedUser"),
        timeout=180,
    )
    output = result.stdout + result.stderr
    assert_no_traceback(output)
    assert result.returncode == 0, output[-3000:]
    windows = _windows(prefix)
    assert all(window["ok"] for window in windows.values()), windows
    added, promoted, removed = windows["add-learner"], windows["promote"], windows["remove"]

    (step,) = added["steps"]
    new = step["member"]
    assert added["members"] == [new]
    times = [step[key] for key in ("asked_at", "added_at", "start_at", "healthy_at", "caught_up_at")]
    assert times == sorted(times), step
    assert step["received_bytes"] > 0, step  # the log it caught up on came over its peer link, through the proxy
    listed = {m["client_urls"][0]: m for m in step["members_after"]}
    assert len(listed) == 4 and listed[new]["learner"] and listed[new]["id"] == step["new_id"], listed
    first_three = [url for url in listed if url != new]
    step_added = step["added_at"]
    assert added["result"].startswith(f"add-learner: {new} member {step['new_id']} added as a learner ("), added

    (step,) = promoted["steps"]
    assert step["member"] == new and step["id"] == added["steps"][0]["new_id"], step
    assert [m["learner"] for m in step["members_after"]] == [False] * 4, step
    assert f"etcd membership: {new} is a voting member; load goes to it" in output

    (step,) = removed["steps"]
    gone = step["member"]
    assert gone in first_three and not step["was_leader"], step
    assert gone not in [m["client_urls"][0] for m in step["members_after"]] and len(step["members_after"]) == 3
    assert f"etcd membership: {gone} is no member's client URL (removed, or spelt otherwise); no more load" in output

    # its /metrics are polled from its addition on, beside the others'
    assert f"etcd metrics: polling {new} too, a member added during the run" in output
    with open(f"{prefix}_etcd_metrics.csv", newline="") as file:
        scraped = [row for row in csv.DictReader(file) if row["Member"] == new and not row["Error"]]
    assert scraped and all(float(row["Timestamp"]) > step_added for row in scraped), scraped
    # the new member served serializable reads once voting; the audit compares the three members at the end
    with open(f"{prefix}_staleness.csv", newline="") as file:
        reads = {row["Member"]: int(row["Reads"]) for row in csv.DictReader(file)}
    assert reads.get(new.removeprefix("http://"), reads.get(new, 0)) > 0, reads
    audit = json.loads(Path(f"{prefix}_audit.json").read_text())
    assert audit["passed"] and audit["hashkv"]["equal"], audit["line"]
    compared = {member["member"] for member in audit["hashkv"]["members"]}
    assert compared == {url.removeprefix("http://") for url in [*first_three, new] if url != gone}, compared
    assert "audit: 3 members' HashKV equal at rev " in output


def test_a_learner_added_in_a_zone_and_never_promoted_is_removed_when_the_run_stops(tmp_out):
    prefix = tmp_out / "run"
    zones = ("--etcd-local-peer-rtt", "0ms", "--etcd-local-zones", "a,a,b", "--etcd-local-zone-rtt", "2ms")
    result = run_locust(
        *HEADLESS,
        *("-u", "2", "-r", "2", "-t", "8s", "--csv", str(prefix), "--etcd-local-members", "3", *zones),
        *("--etcd-user-rate", "20", "--etcd-disrupt", "add-learner@2s", "--exit-code-on-error", "0", "EtcdPutUser"),
        timeout=150,
    )
    output = result.stdout + result.stderr
    assert_no_traceback(output)
    assert result.returncode == 0, output[-3000:]
    window = _windows(prefix)["add-learner"]
    (step,) = window["steps"]
    new = step["member"]
    # it joined the zone with the fewest members, b, and says so
    assert window["ok"] and step["zone"] == "b", window
    assert window["result"].startswith(f"add-learner: {new} member {step['new_id']} added as a learner in zone b ("), (
        window["result"]
    )
    # never promoted: out of the cluster at the run's stop, before the audit compares the three members
    assert (
        f"disruption add-learner at the run's stop: {new} member {step['new_id']} removed from the cluster: a learner "
        "never promoted (etcd takes one learner at a time)"
    ) in output
    assert "audit: 3 members' HashKV equal at rev " in output


def _members(etcdctl: str, endpoints: list[str]) -> list[dict]:
    env = {**os.environ, "ETCDCTL_API": "3"}
    answer = subprocess.run(
        [etcdctl, "--endpoints", ",".join(endpoints), "-w", "json", "member", "list"],
        env=env, capture_output=True, check=True, text=True,
    )  # fmt: skip
    return json.loads(answer.stdout)["members"]


def test_remove_on_a_cluster_the_tool_did_not_start_goes_through_the_cluster_api_as_etcdctl_sees(fresh_etcd3, tmp_out):
    cluster = fresh_etcd3
    prefix = tmp_out / "run"
    args = headless_args(cluster, prefix, "--etcd-disrupt", "remove:follower@6s", "--etcd-disrupt-allowed", seconds=10)
    args += ["--etcd-target", "round-robin", "--etcd-user-rate", "20", "--exit-code-on-error", "0"]
    result = run_locust(*args, "EtcdPutUser", timeout=120)
    output = result.stdout + result.stderr
    assert_no_traceback(output)
    assert result.returncode == 0, output[-3000:]
    window = _windows(prefix)["remove"]
    assert window["ok"], window
    (step,) = window["steps"]
    gone = step["member"]
    listed = _members(etcdctl_path(find_etcd_binary()), [url for url in cluster.endpoints if url != gone])
    assert sorted(m["clientURLs"][0] for m in listed) == sorted(u for u in cluster.endpoints if u != gone)
    assert f"{int(step['id'], 16)}" not in [str(m["ID"]) for m in listed]
    assert cluster.pids[cluster.endpoints.index(gone)] is None  # etcd stopped the member it removed
    assert "audit: 2 members' HashKV equal at rev " in output


def test_promote_without_a_learner_fails_its_window_with_the_reason_and_the_run_goes_on(etcd3, tmp_out):
    prefix = tmp_out / "run"
    own_keys = ("--etcd-prefix", "/promote-without-learner/", "--etcd-cleanup")  # a cluster shared by the session
    args = headless_args(etcd3, prefix, "--etcd-disrupt", "promote@1s", "--etcd-disrupt-allowed", *own_keys, seconds=3)
    result = run_locust(*args, "EtcdPutUser", timeout=60)
    output = result.stdout + result.stderr
    assert_no_traceback(output)
    window = _windows(prefix)["promote"]
    assert window["ok"] is False and window["error"] == (
        "the cluster has no learner to promote; add one first (add-learner@TIME on the local etcd)"
    ), window
    assert "disruption promote@1s failed: the cluster has no learner to promote" in output
    assert result.returncode == 0, output[-3000:]  # no disrupt: gate to fail on it, and the requests passed


@pytest.mark.parametrize(
    ("item", "local", "line"),
    [
        (
            "add-learner@1s",
            False,
            "'add-learner@1s' starts a new member, which only the local etcd the tool starts allows; leave out "
            "--etcd-endpoints for a local cluster, or use defrag, move-leader, snapshot, compact, promote or remove",
        ),
        (
            "remove@1s",
            True,
            "'remove:follower@1s' removes a member, and the cluster has one member; use --etcd-local-members 3",
        ),
    ],
)
def test_membership_changes_a_cluster_cannot_take_are_refused_in_one_line(etcd1, tmp_out, item, local, line):
    if local:
        args = [*HEADLESS, "-u", "1", "-r", "1", "-t", "1s", "--etcd-local-members", "1", "--etcd-disrupt", item]
    else:
        args = headless_args(etcd1, tmp_out / "run", "--etcd-disrupt", item, "--etcd-disrupt-allowed")
    assert refusal_line(run_locust(*args, "EtcdPutUser", timeout=60)) == f"locust-etcd: error: --etcd-disrupt: {line}"
