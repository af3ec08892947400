"""A run split by the etcd versions its members ran (``etcd_users.analysis.phases.version_phases``): from the members'
versions at the start and the steps of its upgrade and rollback windows."""

from etcd_users.analysis.phases import version_phases

OLD, NEW = "3.4.23", "3.5.1"
MEMBERS = {"a": OLD, "b": OLD, "c": OLD}


def step(member: str, stop: float, back: float, before: str = OLD, after: str = NEW) -> dict:
    return {"member": member, "version_before": before, "version_after": after, "stop_at": stop, "caught_up_at": back}


UPGRADE_ALL = {
    "action": "upgrade",
    "steps": [step("a", 103.0, 104.5), step("b", 104.6, 106.0), step("c", 106.1, 107.2)],
}


def spans(phases) -> list[tuple[str, float, float]]:
    return [(phase.label, phase.started, phase.ended) for phase in phases]


def test_a_rolling_upgrade_is_all_old_then_mixed_from_the_first_stop_to_the_last_catch_up_then_all_new():
    assert spans(version_phases(MEMBERS, [UPGRADE_ALL], 100, 114)) == [
        ("all 3.4.23", 100, 103.0),
        ("mixed 3.4.23 + 3.5.1", 103.0, 107.2),
        ("all 3.5.1", 107.2, 114),
    ]


def test_one_member_upgraded_leaves_the_cluster_mixed_to_the_end():
    upgraded = {"action": "upgrade", "steps": [step("b", 103.0, 104.5)]}
    assert spans(version_phases(MEMBERS, [upgraded], 100, 114)) == [
        ("all 3.4.23", 100, 103.0),
        ("mixed 3.4.23 + 3.5.1", 103.0, 114),
    ]


def test_a_refused_rollback_is_a_member_down_on_the_same_version_until_it_is_back():
    refused = {
        "action": "rollback",
        "steps": [{**step("a", 110.0, None, NEW, NEW), "refused": "invalid downgrade", "restart_caught_up_at": 112.0}],
    }
    assert spans(version_phases(MEMBERS, [UPGRADE_ALL, refused], 100, 114))[2:] == [
        ("all 3.5.1", 107.2, 110.0),
        ("3.5.1, a member down", 110.0, 112.0),
        ("all 3.5.1", 112.0, 114),
    ]


def test_a_single_member_down_is_no_member_up():
    assert spans(version_phases({"a": OLD}, [{"action": "upgrade", "steps": [step("a", 103.0, 104.0)]}], 100, 110)) == [
        ("all 3.4.23", 100, 103.0),
        ("no member up", 103.0, 104.0),
        ("all 3.5.1", 104.0, 110),
    ]


def test_other_disruptions_change_no_version_and_a_change_after_the_end_is_not_a_phase():
    killed = {"action": "kill", "steps": [step("a", 103.0, 104.0)]}
    late = {"action": "upgrade", "steps": [step("a", 120.0, 121.0)]}
    assert spans(version_phases(MEMBERS, [killed, late], 100, 114)) == [("all 3.4.23", 100, 114)]
