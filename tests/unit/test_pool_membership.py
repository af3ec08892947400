"""Which endpoints take load as the membership changes (``transport.membership``): the voting members among those
given, and with add-learner the voting members the tool added; a learner and a removed member none."""

from etcd_users.settings import Endpoint
from etcd_users.transport import learners
from etcd_users.transport.membership import change, followed

A, B, C, D = (Endpoint(f"http://127.0.0.1:{port}", False) for port in (2379, 22379, 32379, 42379))
GIVEN = [A, B, C]


def _members(*voters: Endpoint, learner: Endpoint | None = None):
    listed = [learners.Member(ID=index + 1, clientURLs=[e.url + "/"]) for index, e in enumerate(voters)]
    if learner is not None:
        listed.append(learners.Member(ID=99, clientURLs=[learner.url], isLearner=True))
    return listed


def test_nothing_changes_while_the_members_are_those_given():
    assert change(GIVEN, GIVEN, _members(A, B, C), adds=False) is None


def test_a_removed_member_takes_no_more_load_and_the_log_says_why():
    moved = change(GIVEN, GIVEN, _members(A, C), adds=False)
    assert moved.endpoints == [A, C]
    assert moved.lines == [
        f"etcd membership: {B.url} is no member's client URL (removed, or spelt otherwise); no more load goes to it"
    ]


def test_a_learner_the_tool_added_takes_load_once_promoted_and_not_before():
    assert change(GIVEN, GIVEN, _members(A, B, C, learner=D), adds=True) is None
    promoted = change(GIVEN, GIVEN, _members(A, B, C, D), adds=True)
    assert promoted.endpoints == [A, B, C, D] and not D.secure
    assert promoted.lines == [f"etcd membership: {D.url} is a voting member; load goes to it"]


def test_a_voting_member_not_given_takes_no_load_unless_the_tool_added_it():
    assert change(GIVEN, GIVEN, _members(A, B, C, D), adds=False) is None


def test_a_given_member_made_a_learner_again_is_said_so():
    assert change(GIVEN, GIVEN, _members(A, B, learner=C), adds=False).lines == [
        f"etcd membership: {C.url} is a learner; no more load goes to it"
    ]


def test_a_list_that_leaves_no_voting_member_given_changes_nothing():
    assert change(GIVEN, GIVEN, _members(D), adds=False) is None


def test_members_that_advertise_none_of_the_endpoints_given_are_not_followed():
    assert followed(GIVEN, _members(B)) and not followed(GIVEN, _members(D))
    assert not followed([Endpoint("http://localhost:2379", False)], _members(A, B, C))
