"""replace (``etcd_users.features.disruptions.replace``): its items parse like the other members' actions, refusals
before a run are one line, the Cluster API's learner messages go over the wire as etcd's, and which of etcd's refusals
are retried."""

import locust  # noqa: F401  (gevent patching before anything else loads: the action imports Locust)

import grpc
import pytest
from etcd3.etcdrpc import rpc_pb2

from etcd_users.features.disruptions.cluster_api import initial_cluster
from etcd_users.features.disruptions.cluster_api import passes as passes_on
from etcd_users.features.disruptions.replace import _said
from etcd_users.features.disruptions.schedule import (
    Disruption,
    ScheduleError,
    check_allowed,
    parse_item,
    parse_schedule,
)
from etcd_users.transport import learners

URL_A, URL_B, URL_C = "http://127.0.0.1:2379", "http://127.0.0.1:22379", "http://127.0.0.1:32379"


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("replace@3s", Disruption("replace", "follower", 3.0)),
        ("replace:leader@1m", Disruption("replace", "leader", 60.0)),
        (f"replace:{URL_A}@20s", Disruption("replace", URL_A, 20.0)),
    ],
)
def test_replace_items_parse_like_the_other_members_actions(item, expected):
    assert parse_item(item) == expected
    assert parse_item(expected.text) == expected


@pytest.mark.parametrize(
    ("item", "why"),
    [
        ("replace:follower@3s+10s", "has a +DURATION, which replace does not take"),
        ("replace:all@3s", "names member 'all'; replace takes follower, leader, a client URL"),
    ],
)
def test_a_bad_replace_item_is_refused_in_one_line(item, why):
    with pytest.raises(ScheduleError) as refused:
        parse_item(item)
    assert str(refused.value).startswith(f"--etcd-disrupt: {item!r} {why}"), refused.value


def test_a_replacement_on_endpoints_the_tool_did_not_start_is_refused():
    schedule = parse_schedule("--etcd-disrupt", "replace:follower@3s")
    with pytest.raises(ScheduleError) as refused:
        check_allowed(schedule, [URL_A, URL_B, URL_C], local=False, allowed=True)
    assert str(refused.value).startswith(
        "--etcd-disrupt: 'replace:follower@3s' signals a member's process, which only the local etcd the tool starts "
        "allows; leave out --etcd-endpoints for a local cluster"
    )
    check_allowed(schedule, [URL_A, URL_B, URL_C], local=True, allowed=False)


def test_a_replacement_needs_more_than_one_member():
    with pytest.raises(ScheduleError) as refused:
        check_allowed(parse_schedule("--etcd-disrupt", "replace:leader@3s"), [URL_A], local=True, allowed=False)
    assert str(refused.value) == (
        "--etcd-disrupt: 'replace:leader@3s' removes a member and adds it back, and the cluster has one member; use "
        "--etcd-local-members 3"
    )


def test_the_learner_messages_are_etcd_s_on_the_wire():
    # etcd 3.3's stubs read what they know of ours, and ours theirs: the same field numbers
    ours = learners.Member(ID=0xABC, name="m0", peerURLs=["http://p"], clientURLs=["http://c"], isLearner=True)
    theirs = rpc_pb2.Member.FromString(ours.SerializeToString())
    assert (theirs.ID, theirs.name, list(theirs.peerURLs), list(theirs.clientURLs)) == (
        0xABC,
        "m0",
        ["http://p"],
        ["http://c"],
    )
    assert learners.Member.FromString(theirs.SerializeToString()).isLearner is True  # kept as an unknown field
    removal = learners.MemberRemoveRequest(ID=7).SerializeToString()
    assert removal == rpc_pb2.MemberRemoveRequest(ID=7).SerializeToString()
    # etcd's MemberAddRequest: peerURLs = 1, isLearner = 2
    assert (
        learners.MemberAddRequest(peerURLs=["http://p"], isLearner=True).SerializeToString()
        == b"\n\x08http://p\x10\x01"
    )
    assert learners.MemberPromoteRequest(ID=7).SerializeToString() == b"\x08\x07"


def test_the_member_added_joins_with_the_members_etcd_lists_and_its_own_name():
    members = [
        learners.Member(ID=1, name="locust-etcd-1", peerURLs=["http://127.0.0.1:2380"]),
        learners.Member(ID=9, name="", peerURLs=["http://127.0.0.1:2381"], isLearner=True),
        learners.Member(ID=2, name="locust-etcd-2", peerURLs=["http://127.0.0.1:2382"]),
    ]
    assert initial_cluster(members, "locust-etcd-0", 9) == (
        "locust-etcd-1=http://127.0.0.1:2380,locust-etcd-0=http://127.0.0.1:2381,locust-etcd-2=http://127.0.0.1:2382"
    )


def _refusal(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


@pytest.mark.parametrize(
    ("code", "details", "passes"),
    [
        (grpc.StatusCode.UNAVAILABLE, "etcdserver: leader changed", True),
        (grpc.StatusCode.UNAVAILABLE, "etcdserver: unhealthy cluster", True),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", True),
        (
            grpc.StatusCode.FAILED_PRECONDITION,
            "etcdserver: can only promote a learner member which is in sync with leader",
            True,
        ),
        (grpc.StatusCode.FAILED_PRECONDITION, "etcdserver: Peer URLs already exists", False),
        (grpc.StatusCode.PERMISSION_DENIED, "etcdserver: permission denied", False),
        (grpc.StatusCode.NOT_FOUND, "etcdserver: member not found", False),
    ],
)
def test_an_election_and_a_learner_behind_are_retried_any_other_refusal_fails_the_window(code, details, passes):
    assert passes_on(_refusal(code, details)) is passes


def test_the_window_says_each_phase_from_the_kill_and_etcd_s_refusals():
    step = {
        "member": "http://127.0.0.1:2379",
        "old_id": "66e39d2bda71d2df",
        "was_leader": True,
        "new_leader": "http://127.0.0.1:22379",
        "refusals": {"MemberAdd: etcdserver: unhealthy cluster": 3},
        "stop_at": 100.0,
        "elected_at": 101.21,
        "removed_at": 101.22,
        "new_id": "7e76f25ce00446bd",
        "promoted_at": 102.22,
    }
    assert _said(step) == (
        "http://127.0.0.1:2379 (the leader; http://127.0.0.1:22379 elected) member 66e39d2bda71d2df replaced by "
        "7e76f25ce00446bd (elected 1.21 s, removed 1.22 s, promoted 2.22 s after the kill; refused: MemberAdd: "
        "etcdserver: unhealthy cluster ×3)"
    )
