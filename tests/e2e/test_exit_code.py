"""One run that fails every way at once gets the highest code: a gate that cannot pass (3), writes etcd refuses once
another client raised its NOSPACE alarm (Locust's 1), and, when that client also deleted ten of the tool's keys
behind its back, the audit's lost writes (4). The decision itself, pure, is ``tests/unit/test_exit_code.py``."""

import re
import time
import urllib.parse

import etcd3
import pytest
from checks import assert_no_traceback
from etcd3 import etcdrpc
from support import headless_args, read_csv_rows, start_locust

from etcd_users.core.exit_code import AUDIT_EXIT_CODE, SLA_EXIT_CODE
from etcd_users.exposition import fetch_metrics, metric_sum

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

KEY_PREFIX = "/exit-code/"
KEY_SIZE = 32
GATE = "put:p99<0.001ms"  # no put is answered within a microsecond


def key(index: int) -> str:
    """The tool's ``index``-th sequential key: its number fills the key size after the prefix."""
    return f"{KEY_PREFIX}{index:0{KEY_SIZE - len(KEY_PREFIX)}d}"


def refused_puts(cluster) -> float:
    """Puts the member refused for lack of space (``mvcc: database space exceeded``)."""
    metrics = fetch_metrics(cluster.metrics_urls[0])
    return metric_sum(metrics, "grpc_server_handled_total", grpc_method="Put", grpc_code="ResourceExhausted")


@pytest.mark.parametrize(("lose_keys", "code"), [(True, AUDIT_EXIT_CODE), (False, SLA_EXIT_CODE)])
def test_a_run_that_fails_several_ways_exits_with_the_highest_code(fresh_etcd1, tmp_out, lose_keys, code):
    prefix = tmp_out / "run"
    args = (
        *("--etcd-prefix", KEY_PREFIX, "--etcd-key-size", str(KEY_SIZE), "--etcd-key-space-size", "10000000"),
        *("--etcd-sequential-keys", "--etcd-user-rate", "100", "--etcd-sla", GATE),
        "EtcdPutUser",
    )
    address = urllib.parse.urlsplit(fresh_etcd1.endpoints[0])
    client = etcd3.client(address.hostname, address.port, timeout=10)
    try:
        # ended by Ctrl-C once etcd refused a put, however long that took; the run's time is only a bound
        with start_locust(*headless_args(fresh_etcd1, prefix, *args, users=2, seconds=600), log_dir=tmp_out) as locust:
            deadline = time.monotonic() + 60
            while client.get(key(100))[0] is None:  # the first hundred keys are written
                assert time.monotonic() < deadline and locust.poll() is None, locust.output()[1][-3000:]
                time.sleep(0.1)
            if lose_keys:
                assert all(client.delete(key(index)) for index in range(10))
            member = client.maintenancestub.Status(etcdrpc.StatusRequest(), timeout=10).header.member_id
            alarm = etcdrpc.AlarmRequest(action=etcdrpc.AlarmRequest.ACTIVATE, memberID=member, alarm=etcdrpc.NOSPACE)
            client.maintenancestub.Alarm(alarm, timeout=10)  # from now on etcd refuses every write
            while not refused_puts(fresh_etcd1):
                assert time.monotonic() < deadline and locust.poll() is None, locust.output()[1][-3000:]
                time.sleep(0.1)
            locust.interrupt()
            result = locust.finish(timeout=60)
    finally:
        client.close()
    assert_no_traceback(result.stderr)
    assert result.returncode == code, result.stderr[-3000:]
    put = next(row for row in read_csv_rows(f"{prefix}_stats.csv") if row["Name"] == "put")
    assert int(put["Failure Count"]) > 0 and "etcdserver: mvcc: database space exceeded" in result.stderr
    audit = [line for line in result.stderr.splitlines() if line.startswith("audit")]
    assert len(audit) == 1 and audit[0].startswith("audit FAILED" if lose_keys else "audit: "), result.stderr[-3000:]
    # the users still run while the code is decided: the count may be short of the final table's
    why = r"1 of 1 gates failed \(put p99 < 0\.001ms\) \[3\]; [\d,]+ requests failed \[1\]"
    why = rf"the audit failed \[4\]; {why}" if lose_keys else why
    assert re.search(rf"exit code {code}: {why}\n", result.stderr), result.stderr[-3000:]
