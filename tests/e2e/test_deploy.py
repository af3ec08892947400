"""The Kubernetes manifests' variables drive a real run: a master with the Job's environment and a worker with the
worker Deployment's, against a real etcd. The manifests themselves are checked in ``tests/unit/test_deploy.py``."""

import re

import pytest
from support import deploy_manifests, free_port, pod_environment, start_locust

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_the_job_and_worker_environments_run_a_test(etcd1, tmp_out):
    """The pods' variables alone drive a real run: only addresses, sizes and time are changed for this machine."""
    manifests = deploy_manifests()
    port = str(free_port())
    local = {
        "LOCUST_ETCD_ENDPOINTS": etcd1.endpoints[0],
        "LOCUST_ETCD_CONNS": "1",
        "LOCUST_ETCD_SLA": "put:p99<5s,errors<0.1%",
        "LOCUST_USERS": "2",
        "LOCUST_SPAWN_RATE": "2",
        "LOCUST_RUN_TIME": "3s",
        "LOCUST_EXPECT_WORKERS": "1",
        "LOCUST_MASTER_BIND_HOST": "127.0.0.1",
        "LOCUST_MASTER_BIND_PORT": port,
        "LOCUST_MASTER_NODE_HOST": "127.0.0.1",
        "LOCUST_MASTER_NODE_PORT": port,
        "LOCUST_ETCD_PROMETHEUS_PORT": str(free_port()),  # the exporter's, on this machine's loopback only
        "LOCUST_WEB_HOST": "127.0.0.1",
    }
    master_env = {**pod_environment(manifests, "Job", "locust-etcd-master"), **local}
    worker_env = {**pod_environment(manifests, "Deployment", "locust-etcd-worker"), **local}
    with start_locust(env=master_env, log_dir=tmp_out) as master, start_locust(env=worker_env, log_dir=tmp_out):
        finished = master.finish(timeout=60)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert "1 workers connected" in finished.stderr
    assert f"Prometheus metrics at http://127.0.0.1:{local['LOCUST_ETCD_PROMETHEUS_PORT']}/metrics" in finished.stderr
    assert "SLA put p99 < 5s: " in finished.stderr and "SLA Aggregated errors < 0.1%: 0.000% (0 of " in finished.stderr
    assert re.search(r"deleted \d+ keys under '/locust-etcd/'", finished.stderr)  # LOCUST_ETCD_CLEANUP=true
