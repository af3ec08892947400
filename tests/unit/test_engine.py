"""The loop engine's parts without a run: the requests' bytes against protobuf's, a batch logged into Locust's
statistics against Locust's own logging of the same requests, the latency store's batch against its listener, and
which way each User class goes.

Runs of both ways end to end are in ``tests/e2e/test_engine.py``.
"""

import locust  # noqa: F401  (gevent patching before anything else loads)
import locust.stats
from locust import User, task
from locust.stats import RequestStats

import random

import pytest
from etcd3.etcdrpc import rpc_pb2

from etcd_users.features.engine.choice import engine_line, ready, runs_on_loop
from etcd_users.features.engine.locust_adapter import is_locust_listener, log_batch
from etcd_users.latency import store as latency_store
from etcd_users.latency.store import INTENDED_CONTEXT_KEY, LatencyStore
from etcd_users.transport.wire import KeyRequests, field_header, put_revision, varint


@pytest.mark.parametrize("key_size, value_size", [(256, 1024), (16, 0), (130, 127), (200, 20000)])
def test_the_requests_bytes_are_protobuf_s_serialization(key_size, value_size):
    value = random.randbytes(value_size)
    requests = KeyRequests(key_size, value)
    for key in (b"/p/" + b"k" * (key_size - 3), b"/other-size/1"):  # the key size made once, and another
        assert requests.put(key) == rpc_pb2.PutRequest(key=key, value=value).SerializeToString()
        for serializable in (False, True):
            expected = rpc_pb2.RangeRequest(key=key, serializable=serializable).SerializeToString()
            assert requests.read(key, serializable) == expected
        assert requests.delete(key) == rpc_pb2.DeleteRangeRequest(key=key).SerializeToString()


def test_varints_and_field_headers_as_protobuf_writes_them():
    for value in (0, 1, 127, 128, 300, 2**14, 2**21 + 5, 2**40):
        message = rpc_pb2.RangeRequest(limit=value).SerializeToString()
        assert message == (b"\x18" + varint(value) if value else b"")
    assert field_header(2, 1024) == rpc_pb2.PutRequest(value=b"x" * 1024).SerializeToString()[:3]


def test_a_put_s_revision_is_read_from_its_answer_s_bytes():
    header = rpc_pb2.ResponseHeader(cluster_id=2**63 - 1, member_id=7, revision=123_456_789, raft_term=3)
    assert put_revision(rpc_pb2.PutResponse(header=header).SerializeToString()) == 123_456_789


def locust_logged(requests, monkeypatch) -> RequestStats:
    """Locust's own listener's logging of ``requests`` (name, seconds, at, length, label), each at its time."""
    stats = RequestStats(use_response_times_cache=True)
    clock = {"now": 0.0}
    monkeypatch.setattr(locust.stats.time, "time", lambda: clock["now"])
    for name, seconds, at, length, label, _intended in requests:
        clock["now"] = at
        stats.log_request("etcd", name, seconds * 1000.0, length)
        if label is not None:
            stats.log_error("etcd", name, label)
    monkeypatch.undo()
    return stats


def entry_figures(entry) -> dict:
    return {
        "requests": entry.num_requests,
        "failures": entry.num_failures,
        "per_second": dict(entry.num_reqs_per_sec),
        "failures_per_second": dict(entry.num_fail_per_sec),
        "response_times": dict(entry.response_times),
        "total_response_time": round(entry.total_response_time, 6),
        "min": entry.min_response_time,
        "max": entry.max_response_time,
        "length": entry.total_content_length,
        "last": entry.last_request_timestamp,
        # the web UI's copies at each new second; an entry also keeps an empty one of the second it was made in
        "cache": {
            second: dict(cached.response_times)
            for second, cached in entry.response_times_cache.items()
            if cached.response_times
        },
    }


def test_a_batch_logs_into_locust_s_statistics_as_locust_logs_each_request(monkeypatch):
    generator = random.Random(7)
    requests, at = [], 1_700_000_000.2
    for _ in range(5000):  # over several seconds, three names, a few failures, times from 0.1 ms to 3 s
        at += generator.expovariate(1500)
        name = generator.choice(["put", "range/linearizable", "delete"])
        seconds = generator.choice([generator.uniform(0.0001, 0.02), generator.uniform(0.02, 3.0)])
        label = generator.choice([None] * 30 + ["etcdserver: too many requests", "UNAVAILABLE"])
        requests.append((name, seconds, at, 0 if label else generator.randrange(20, 2000), label, None))
    expected = locust_logged(requests, monkeypatch)
    batched = RequestStats(use_response_times_cache=True)
    for start in range(0, len(requests), 377):  # in batches of any size, as the loop hands them over
        log_batch(batched, "etcd", requests[start : start + 377])
    assert entry_figures(batched.total) == entry_figures(expected.total)
    assert set(batched.entries) == set(expected.entries)
    for key, entry in expected.entries.items():
        assert entry_figures(batched.entries[key]) == entry_figures(entry), key
    assert {key: error.to_dict() for key, error in batched.errors.items()} == {
        key: error.to_dict() for key, error in expected.errors.items()
    }
    assert batched.total.num_failures > 0 and len(batched.entries) == 3  # the comparison covered failures and names


def test_a_batch_missing_a_result_does_not_match_locust_s_own(monkeypatch):
    requests = [("put", 0.002, 1_700_000_000.5 + index / 1000, 100, None, None) for index in range(100)]
    expected = locust_logged(requests, monkeypatch)
    batched = RequestStats(use_response_times_cache=True)
    log_batch(batched, "etcd", requests[:-1])  # one result dropped on the way
    assert entry_figures(batched.total) != entry_figures(expected.total)


def test_locust_s_own_request_listener_is_told_apart_from_others():
    from locust.env import Environment

    environment = Environment(user_classes=[])
    runner = environment.create_local_runner()
    handlers = environment.events.request._handlers
    assert sum(map(is_locust_listener, handlers)) == 1
    assert not is_locust_listener(lambda **_kwargs: None)
    runner.quit()


def test_the_store_s_batch_records_what_its_listener_records(monkeypatch):
    generator = random.Random(3)
    requests, at = [], 1_700_000_000.0
    for _ in range(3000):
        at += generator.expovariate(1000)
        label = generator.choice([None] * 20 + ["UNAVAILABLE"])
        intended = generator.choice([None, generator.uniform(0.001, 0.5)])
        requests.append(("put", generator.uniform(0.0002, 0.05), at, 10, label, intended))
    one_by_one, batched = LatencyStore(), LatencyStore()
    one_by_one.fine = batched.fine = True  # the timeline's parts too
    for name, seconds, when, _length, label, intended in requests:
        monkeypatch.setattr(latency_store, "_now", lambda when=when: when)
        context = {INTENDED_CONTEXT_KEY: intended * 1000.0} if intended is not None else {}
        one_by_one.record("etcd", name, seconds * 1000.0, label, context)
    batched.record_batch("etcd", requests)
    one_by_one.fold_recorded()
    batched.fold_recorded()
    assert batched.snapshot() == one_by_one.snapshot()
    assert batched.first_request == one_by_one.first_request == requests[0][2]
    assert batched.last_request == one_by_one.last_request == requests[-1][2]


def test_the_ready_workloads_go_on_the_loop_and_tasks_of_one_s_own_on_greenlets():
    class Ready(User):
        @task
        @ready
        def work(self):
            pass

    class Own(User):
        @task
        def work(self):
            pass

    class Both(Ready):
        @task
        def other(self):
            pass

    assert runs_on_loop(Ready, "loop") and not runs_on_loop(Ready, "greenlet")
    assert not runs_on_loop(Own, "loop") and not runs_on_loop(Both, "loop")
    line = engine_line([Ready, Own], "loop")
    assert line == (
        "engine: Ready on the loop thread (a coroutine per user, results in batches); Own on greenlets (tasks of its "
        "own)"
    )
    assert engine_line([Ready], "greenlet") == "engine: Ready on greenlets (--etcd-engine greenlet)"


def test_this_locust_has_what_logging_a_batch_takes_and_a_missing_part_is_named(monkeypatch):
    from etcd_users.features.engine import locust_adapter

    assert locust_adapter.batch_logging_missing() is None
    monkeypatch.setattr(locust_adapter, "_ENTRY_FIELDS", (*locust_adapter._ENTRY_FIELDS, "num_reqs_per_minute"))
    missing = locust_adapter.batch_logging_missing()
    assert missing == f"Locust {locust.__version__} has no StatsEntry.num_reqs_per_minute"


def test_the_bucket_of_a_locust_without_its_function_is_the_rounding_it_wrote_inline():
    from etcd_users.features.engine.locust_adapter import _inline_bucket

    newer = getattr(locust.stats, "bucket_response_time", None)
    values = [0.4, 0.5, 1.49, 99.4, 99.6, 147.0, 994.9, 3432.0, 58760.0, 123456.7]
    assert [_inline_bucket(value) for value in values] == [0, 0, 1, 99, 100, 150, 990, 3400, 59000, 123000]
    if newer is not None:  # the same buckets as the function that replaced it
        assert [newer(value) for value in values] == [_inline_bucket(value) for value in values]
