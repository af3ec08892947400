"""The pure parts of scale: the lost workers' lines and verdict, and which connections fit in a process's files."""

import resource

from etcd_users.features.gates.worker_watch import WORKERS_GATE
from etcd_users.judging.sla import Result
from etcd_users.members.lost_workers import LostWorker, end_line, verdict_text, warning_line
from etcd_users.open_files import OTHER_FILES, connections_error

LOST = LostWorker(worker="vm_1a2b", at=1_000.4, at_s=10.4, users=32, run_users=64)


def test_the_warning_names_the_worker_its_users_and_its_share_of_the_rate():
    assert warning_line(LOST, 3.6, user_rate=0.5) == (
        "worker vm_1a2b lost at 10 s (no heartbeat for 4 s): its load (32 of 64 users, 16 req/s of 32 req/s) went "
        "with it; the run goes on without it and is not the run planned"
    )
    assert "(32 of 64 users)" in warning_line(LOST, 3.0)  # a closed-loop run has no planned rate


def test_the_verdict_counts_the_lost_workers_among_the_run_s_and_their_users():
    second = LOST._replace(worker="vm_3c4d", at_s=21.0, users=16)
    assert verdict_text([LOST], 2) == "1 of 2 lost at 10 s (32 users): the run was not the run planned"
    assert verdict_text([LOST, second], 3, 0.05) == (
        "2 of 3 lost at 10 s, 21 s (48 users, 2.4 req/s): the run was not the run planned"
    )
    assert verdict_text([LOST], 0).startswith("1 of 1 lost")  # never fewer workers than lost ones
    assert end_line([LOST], 2) == "WARNING workers: 1 of 2 lost at 10 s (32 users): the run was not the run planned"
    result = Result(WORKERS_GATE, 1.0, False, verdict_text([LOST], 2))
    assert result.line() == "SLA workers: 1 of 2 lost at 10 s (32 users): the run was not the run planned FAIL"
    assert result.label == "workers"


def test_a_lost_worker_s_record_is_plain_json():
    assert LOST._replace(returned_at=1_005.0).to_dict() == {
        "worker": "vm_1a2b", "at": 1000.4, "at_s": 10.4, "users": 32, "run_users": 64, "returned_at": 1005.0,
    }  # fmt: skip


def test_connections_that_fit_under_the_limit_less_the_other_files_pass():
    assert connections_error(100, 3, 300 + OTHER_FILES) is None
    assert connections_error(20_000, 1, resource.RLIM_INFINITY) is None


def test_connections_that_do_not_fit_name_the_processes_and_the_connections_each():
    assert connections_error(20_000, 1, 20_000) == (
        "--etcd-conns: 20000 connections per process (--etcd-conns 20000 × 1 endpoint) do not fit in its open-file "
        f"limit of 20000 less {OTHER_FILES} for its other files; spread them over 2 processes with --etcd-conns 10000 "
        "each (--processes 2, or 2 workers), or raise the hard limit (ulimit -Hn)"
    )
    # three endpoints: whole connections per endpoint in each process
    assert "spread them over 4 processes with --etcd-conns 250 each" in connections_error(1000, 3, 1024)
    assert "raise the hard limit (ulimit -Hn, LimitNOFILE=)" in connections_error(10, 3, 100)
