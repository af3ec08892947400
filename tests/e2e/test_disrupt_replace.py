"""replace under a put load on the tool's own etcd of three members: a follower, then the leader, replaced after a
disk failure (killed, removed, wiped, added back as a learner, caught up, promoted); the window holds each phase's
time and the member IDs, etcd's member list after it has three voting members with the new ID, and the audit finds the
members equal. Refusals before a run are one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from checks import assert_no_traceback, refusal_line
from support import HEADLESS, headless_args, run_locust

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PHASES = ("stop_at", "removed_at", "wiped_at", "added_at", "start_at", "healthy_at", "caught_up_at", "promoted_at")


@pytest.mark.parametrize("member", ["follower", "leader"])
def test_a_member_replaced_under_load_comes_back_as_a_new_voting_member_with_the_same_data(tmp_out, member):
    prefix, item = tmp_out / "run", f"replace:{member}@3s"
    timing = ("-u", "8", "-r", "8", "-t", "12s", "--csv", str(prefix), "--etcd-local-members", "3")
    result = run_locust(*HEADLESS, *timing, "--etcd-disrupt", item, "EtcdPutUser", timeout=120)
    output = result.stdout + result.stderr
    assert_no_traceback(output)
    assert result.returncode in (0, 1), output[-3000:]  # 1: puts in flight to the killed member failed
    (window,) = json.loads(Path(f"{prefix}_disruptions.json").read_text())["windows"]
    assert window["item"] == item and window["ok"] is True and window["error"] == "", window
    (step,) = window["steps"]
    assert window["members"] == [step["member"]]
    assert step["was_leader"] is (member == "leader"), step
    times = [step[key] for key in PHASES]
    assert times == sorted(times), step
    if member == "leader":  # the others elect a leader before etcd takes the removal
        assert step["stop_at"] <= step["elected_at"] <= step["removed_at"] and step["new_leader"] != step["member"]
    assert window["started_at"] == step["stop_at"] and window["finished_at"] >= step["promoted_at"]
    # a new member on the same URLs: a new ID, voting, among three voting members
    assert step["new_id"] and step["new_id"] != step["old_id"], step
    listed = step["members_after"]
    assert len(listed) == 3 and not any(m["learner"] for m in listed), listed
    (replaced,) = [m for m in listed if step["member"] in m["client_urls"]]
    assert replaced["id"] == step["new_id"] and replaced["name"], replaced
    assert step["old_id"] not in [m["id"] for m in listed]
    assert all(count > 0 for count in step["refusals"].values()), step
    assert window["result"].startswith(f"replace: {step['member']}"), window["result"]
    assert f"member {step['old_id']} replaced by {step['new_id']} (" in window["result"]
    (put,) = [entry for entry in window["cost"] if entry["name"] == "put"]
    assert put["requests"] > 0 and put["gap_ms"] > 0, put
    assert f"disruption {item} cost: put: longest gap without a success {put['gap_ms']:g} ms" in output
    audit = json.loads(Path(f"{prefix}_audit.json").read_text())
    assert audit["passed"] and audit["hashkv"]["equal"], audit["line"]
    assert "audit: 3 members' HashKV equal at rev " in output


def test_a_replacement_the_run_stops_half_way_leaves_three_voting_members_with_the_same_data(tmp_out):
    prefix = tmp_out / "run"
    timing = ("-u", "8", "-r", "8", "-t", "4s", "--csv", str(prefix), "--etcd-local-members", "3")
    result = run_locust(*HEADLESS, *timing, "--etcd-disrupt", "replace:follower@3s", "EtcdPutUser", timeout=120)
    output = result.stdout + result.stderr
    assert_no_traceback(output)
    assert result.returncode in (0, 1), output[-3000:]
    (window,) = json.loads(Path(f"{prefix}_disruptions.json").read_text())["windows"]
    # the stop lands in one phase or another (or after the last): the member is back, promoted, in each case
    assert window["ok"] or window["error"] == "interrupted: the run stopped", window
    (step,) = window["steps"]
    assert "removed_at" not in step or step["promoted_at"] >= step["added_at"], step
    audit = json.loads(Path(f"{prefix}_audit.json").read_text())
    assert audit["passed"] and audit["hashkv"]["equal"], audit["line"]
    assert "audit: 3 members' HashKV equal at rev " in output


def test_a_replacement_on_endpoints_the_tool_did_not_start_is_refused_in_one_line(etcd1, tmp_out):
    args = headless_args(etcd1, tmp_out / "run", "--etcd-disrupt", "replace:leader@1s", "--etcd-disrupt-allowed")
    line = refusal_line(run_locust(*args, "EtcdPutUser", timeout=60))
    assert line.startswith(
        "locust-etcd: error: --etcd-disrupt: 'replace:leader@1s' signals a member's process, which only the local "
        "etcd the tool starts allows; leave out --etcd-endpoints"
    ), line


def test_a_replacement_on_a_local_etcd_of_one_member_is_refused_in_one_line():
    args = ("-u", "1", "-r", "1", "-t", "1s", "--etcd-disrupt", "replace:leader@1s", "EtcdPutUser")
    line = refusal_line(run_locust(*HEADLESS, *args, timeout=60))
    assert line == (
        "locust-etcd: error: --etcd-disrupt: 'replace:leader@1s' removes a member and adds it back, and the cluster "
        "has one member; use --etcd-local-members 3"
    ), line
