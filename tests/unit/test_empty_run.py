"""The line of a run that measured no request, and what a preparation says in the summary."""

from __future__ import annotations

from etcd_users.features.empty_run.hooks import why_empty
from etcd_users.features.summary.summary import preparation_of
from etcd_users.workload_model.preparation import KEY_SPACE, KUBERNETES, Preparation

PREFIX = "locust-etcd: no request was measured: "


def test_a_failed_fill_is_the_cause_whatever_the_users_did():
    fill = Preparation(KEY_SPACE, 20_000, 4_215, 1.2, "etcdserver: mvcc: database space exceeded")
    assert why_empty([fill], 2.0, 2.0, 4, 0) == (
        f"{PREFIX}the key space fill stopped after 4,215 of 20,000 keys (etcdserver: mvcc: database space exceeded), "
        "and the users that read it stopped"
    )


def test_a_failed_kubernetes_prefill_says_so_without_the_readers():
    prefill = Preparation(KUBERNETES, 1_000, 10, 3.0, "stopped after --etcd-k8s-prefill-seconds")
    assert why_empty([prefill], 5.0, 5.0, 4, 4) == (
        f"{PREFIX}the Kubernetes prefill stopped after 10 of 1,000 keys (stopped after --etcd-k8s-prefill-seconds)"
    )


def test_a_fill_inside_the_run_that_took_its_whole_run_time():
    fill = Preparation(KEY_SPACE, 50_000, 50_000, 21.4, inside_run=True)
    assert why_empty([fill], 20.0, 20.0, 16, 16) == (
        f"{PREFIX}the key space fill took the whole run (21 s of a run time of 20 s); give a longer run time or a "
        "smaller --etcd-key-space-size"
    )
    # written before the clock started (a headless run): not the cause
    before = Preparation(KEY_SPACE, 50_000, 50_000, 21.4, inside_run=False)
    assert "took the whole run" not in why_empty([before], 20.0, 20.0, 16, 16)


def test_users_that_never_started_stopped_or_never_finished_a_request():
    assert why_empty([], 2.0, 2.0, 0, 0) == f"{PREFIX}no user was started (a user count of 0)"
    assert (
        why_empty([], 2.0, 2.0, 4, 0) == f"{PREFIX}every user stopped before its first request (see the errors above)"
    )
    assert why_empty([], 3.2, None, 1, 1) == (
        f"{PREFIX}1 user ran for 3 s and none of their requests ended, neither answered nor failed"
    )


def test_the_summary_holds_each_preparation_by_kind_and_null_without_one():
    class Hooks:
        def __init__(self, preparation):
            self.preparation = preparation

    fill = Preparation(KEY_SPACE, 10_000, 10_000, 3.4567)
    assert preparation_of([Hooks(None), Hooks(fill)]) == {
        "key_space": {"keys": 10_000, "written": 10_000, "seconds": 3.457, "error": None}
    }
    assert preparation_of([Hooks(None)]) is None
