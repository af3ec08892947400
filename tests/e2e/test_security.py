"""TLS, mutual TLS and etcd authentication end to end: local members with certificates or auth enabled, real
Locust processes, and the one-line refusals of bad credentials."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from certs import Certs, etcd_client, make_certs
from checks import assert_no_traceback, failure_labels, refusal_line, stats_rows
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from etcd3.etcdrpc import auth_pb2, rpc_pb2
from support import HEADLESS, REPO, headless_args, member_counter, run_locust, start_locust

from etcd_users.exposition import fetch_metrics, metric_sum
from etcd_users.local import ClusterError, LocalCluster
from etcd_users.workload_model.keys import prefix_range_end

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT_PASSWORD = "root-Pw-41c9"
USER, PASSWORD = "locust", "user-Pw-93fe"
READER, READER_PASSWORD = "reader", "reader-Pw-7c1b"  # a role that may only read the prefix
PREFIX = "/locust-etcd/"


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def _cluster(**kwargs) -> LocalCluster:
    cluster = LocalCluster(1, **kwargs)
    try:
        cluster.start(timeout=30)
    except ClusterError as error:
        pytest.fail(str(error), pytrace=False)
    return cluster


@pytest.fixture(scope="module")
def tls_etcd(certs) -> Iterator[LocalCluster]:
    cluster = _cluster(name="tls", tls=certs.cluster_tls())
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def mtls_etcd(certs) -> Iterator[LocalCluster]:
    cluster = _cluster(name="mtls", tls=certs.cluster_tls(client_cert_auth=True))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def auth_etcd(certs) -> Iterator[LocalCluster]:
    """Auth on, root plus USER limited to PREFIX; tokens expire after 1 s unused, to provoke refreshes.

    Over TLS: gRPC sends no password over a plain channel (python3-etcd3 refuses to), nor should anyone.
    """
    extra_args = ["--auth-token", "simple", "--auth-token-ttl", "1"]
    cluster = _cluster(name="auth", tls=certs.cluster_tls(), extra_args=extra_args)
    try:
        add_reader(etcd_client(cluster.endpoints[0], certs))  # while authentication is still off
        cluster.enable_auth(ROOT_PASSWORD, USER, PASSWORD, PREFIX)
        yield cluster
    finally:
        cluster.stop()


def add_reader(client) -> None:
    """User READER with a role of its own name that may read the keys under PREFIX, and not write them."""
    prefix = PREFIX.encode()
    permission = auth_pb2.Permission(permType=auth_pb2.Permission.READ, key=prefix, range_end=prefix_range_end(prefix))
    client.authstub.RoleAdd(rpc_pb2.AuthRoleAddRequest(name=READER))
    client.authstub.RoleGrantPermission(rpc_pb2.AuthRoleGrantPermissionRequest(name=READER, perm=permission))
    client.authstub.UserAdd(rpc_pb2.AuthUserAddRequest(name=READER, password=READER_PASSWORD))
    client.authstub.UserGrantRole(rpc_pb2.AuthUserGrantRoleRequest(user=READER, role=READER))


PUT_RUN_USERS = 4


def put_run(cluster: LocalCluster, out: Path, *args: str, users: int = PUT_RUN_USERS, seconds: int = 2):
    """A headless EtcdPutUser run; ``args`` come after the endpoints and may add the TLS and auth options."""
    args = ("--etcd-timeout", "3", *args, "EtcdPutUser")
    return run_locust(*headless_args(cluster, out / "run", *args, users=users, seconds=seconds), timeout=90)


def assert_clean_puts(result, out: Path) -> int:
    assert result.returncode == 0, result.stderr[-3000:]
    assert_no_traceback(result.stdout + result.stderr)
    puts = stats_rows(out / "run")["put"]
    assert int(puts["Failure Count"]) == 0, failure_labels(out / "run")
    assert int(puts["Request Count"]) > 0
    return int(puts["Request Count"])


# -- TLS ---------------------------------------------------------------------------------------------------


def test_https_with_the_ca_runs_clean(tls_etcd, certs, tmp_out):
    assert tls_etcd.endpoints[0].startswith("https://")
    result = put_run(tls_etcd, tmp_out, "--etcd-cacert", str(certs.ca), "--etcd-cleanup")
    puts = assert_clean_puts(result, tmp_out)
    # the cluster's metrics stay on a plain port of their own under TLS
    assert tls_etcd.metrics_urls[0].startswith("http://")
    [handled] = member_counter(tls_etcd, "Put")
    assert handled >= puts
    assert etcd_client(tls_etcd.endpoints[0], certs).get_prefix_response(PREFIX, count_only=True).count == 0


def test_mutual_tls_with_the_client_certificate_runs_clean(mtls_etcd, certs, tmp_out):
    tls_args = ("--etcd-cacert", str(certs.ca), "--etcd-cert", str(certs.client_cert))
    result = put_run(mtls_etcd, tmp_out, *tls_args, "--etcd-key", str(certs.client_key), "--etcd-cleanup")
    assert_clean_puts(result, tmp_out)


def test_mutual_tls_without_a_client_certificate_is_one_line(mtls_etcd, certs, tmp_out):
    line = refusal_line(put_run(mtls_etcd, tmp_out, "--etcd-cacert", str(certs.ca)))
    assert mtls_etcd.endpoints[0] in line
    assert "CERTIFICATE" in line  # the TLS alert: the server wants a certificate
    assert "--etcd-cert" in line and "--etcd-key" in line  # what to give it


def test_a_server_certificate_from_another_ca_is_one_line(tls_etcd, certs, tmp_out):
    line = refusal_line(put_run(tls_etcd, tmp_out, "--etcd-cacert", str(certs.other_ca)))
    assert tls_etcd.endpoints[0] in line
    assert "CERTIFICATE_VERIFY_FAILED" in line
    assert "--etcd-cacert" in line


@pytest.mark.parametrize("flag", ["--etcd-cacert", "--etcd-cert", "--etcd-key"])
def test_a_missing_pem_file_is_one_line_naming_the_option(flag, certs, tmp_path):
    files = {"--etcd-cacert": certs.ca, "--etcd-cert": certs.client_cert, "--etcd-key": certs.client_key}
    files[flag] = tmp_path / "missing.pem"
    args = [item for option, path in files.items() for item in (option, str(path))]
    endpoints = ("--etcd-endpoints", "https://127.0.0.1:1")
    result = run_locust(*HEADLESS, "-u", "1", "-t", "1s", *endpoints, *args, "EtcdPutUser")
    line = refusal_line(result)
    assert line.startswith(f"locust-etcd: error: {flag}: cannot read '{tmp_path / 'missing.pem'}'")


def der_of(pem: Path, directory: Path) -> Path:
    """The same certificate in DER: what a user may hand over instead of PEM."""
    der = directory / f"{pem.stem}.der"
    der.write_bytes(x509.load_pem_x509_certificate(pem.read_bytes()).public_bytes(serialization.Encoding.DER))
    return der


def test_a_ca_that_is_not_pem_is_one_line_without_grpc_noise(tls_etcd, certs, tmp_path, tmp_out):
    # gRPC's own complaint: 6-8 lines of C-core log, and a message that blamed reachability
    der = der_of(certs.ca, tmp_path)
    line = refusal_line(put_run(tls_etcd, tmp_out, "--etcd-cacert", str(der)))
    assert line == (
        f"locust-etcd: error: --etcd-cacert: '{der}' is not PEM (no '-----BEGIN ' line); give the CA certificate in "
        "PEM, converted from DER with: openssl x509 -inform DER -in CA -out ca.pem"
    )


def test_a_client_key_of_another_certificate_is_one_line(mtls_etcd, certs, tmp_out):
    tls_args = ("--etcd-cacert", str(certs.ca), "--etcd-cert", str(certs.client_cert))
    line = refusal_line(put_run(mtls_etcd, tmp_out, *tls_args, "--etcd-key", str(certs.server_key)))
    assert line == (
        f"locust-etcd: error: --etcd-cert and --etcd-key: '{certs.server_key}' is not the key of the certificate "
        f"'{certs.client_cert}' (KEY_VALUES_MISMATCH); give the key that belongs to it"
    )


@pytest.mark.parametrize("endpoints", [("--etcd-endpoints", "http://127.0.0.1:1"), ()], ids=["http", "local"])
def test_tls_files_without_an_https_endpoint_are_refused(certs, endpoints):
    # they were silently ignored: the run went on in plain text; and no local etcd is started for it
    result = run_locust(*HEADLESS, "-u", "1", "-t", "1s", *endpoints, "--etcd-cacert", str(certs.ca), "EtcdPutUser")
    line = refusal_line(result)
    where = (
        "--etcd-endpoints lists only http:// ones"
        if endpoints
        else "without --etcd-endpoints the tool starts a local etcd, which is plain http"
    )
    assert line == (
        f"locust-etcd: error: --etcd-cacert: TLS files are for https:// endpoints, and {where}; give https://HOST:PORT "
        "endpoints or leave it out"
    )
    assert "local etcd (" not in result.stderr


# -- authentication ----------------------------------------------------------------------------------------


def test_a_user_limited_to_the_prefix_runs_clean(auth_etcd, certs, tmp_out):
    result = put_run(auth_etcd, tmp_out, "--etcd-cacert", str(certs.ca), "--etcd-user", f"{USER}:{PASSWORD}")
    root = etcd_client(auth_etcd.endpoints[0], certs, user="root", password=ROOT_PASSWORD)
    try:
        puts = assert_clean_puts(result, tmp_out)
        written = root.get_prefix_response(PREFIX, count_only=True).count
        # a put in flight when the run stopped (one per user at most, more often on a busy machine) is applied by
        # etcd but not counted by Locust
        assert 0 < written <= puts + PUT_RUN_USERS
    finally:
        root.delete_prefix(PREFIX)  # the module's later tests expect the prefix empty, even after a failure here


def test_a_wrong_password_names_the_user_and_never_shows_a_password(auth_etcd, certs, tmp_out):
    wrong = "Wrong-pw-5d2a"
    result = put_run(auth_etcd, tmp_out, "--etcd-cacert", str(certs.ca), "--etcd-user", f"{USER}:{wrong}")
    line = refusal_line(result)
    assert f"refused user '{USER}'" in line
    assert "authentication failed" in line
    for secret in (wrong, PASSWORD, ROOT_PASSWORD):
        assert secret not in result.stdout + result.stderr


NOT_ALLOWED_AT_THE_PREFIX = [
    pytest.param((), "--etcd-user", id="no-user"),
    pytest.param(("--etcd-user", f"{USER}:{PASSWORD}", "--etcd-prefix", "/other/"), "/other/", id="other-prefix"),
]


@pytest.mark.parametrize("args, expected", NOT_ALLOWED_AT_THE_PREFIX)
def test_a_user_etcd_refuses_at_the_prefix_is_one_line(auth_etcd, certs, tmp_out, args, expected):
    line = refusal_line(put_run(auth_etcd, tmp_out, "--etcd-cacert", str(certs.ca), *args))
    assert expected in line


@pytest.mark.parametrize("user_class", ["EtcdPutUser", "SerializableRangeUser"])
def test_a_user_that_may_only_read_is_refused_at_start_naming_the_role_to_grant(auth_etcd, certs, tmp_out, user_class):
    # the start-up check used to only read: the run then failed every request with permission denied, and the
    # pre-flight burst, denied too, was reported as "0 puts ... deleted"; reads write their key space first
    args = ("--etcd-cacert", str(certs.ca), "--etcd-user", f"{READER}:{READER_PASSWORD}")
    command = headless_args(auth_etcd, tmp_out / "run", "--etcd-timeout", "3", *args, user_class, users=1, seconds=2)
    result = run_locust(*command, timeout=90)
    line = refusal_line(result)
    assert line == (
        f"locust-etcd: error: --etcd-user '{READER}' may read '{PREFIX}' but not write it (etcdserver: permission "
        "denied), and every workload writes (reads first write their key space); grant its role 'reader' readwrite "
        f"on the prefix (etcdctl role grant-permission {READER} --prefix readwrite {PREFIX}) or use another "
        "--etcd-prefix"
    )
    assert "pre-flight" not in result.stderr  # the run ended before the burst
    assert READER_PASSWORD not in result.stdout + result.stderr
    root = etcd_client(auth_etcd.endpoints[0], certs, user="root", password=ROOT_PASSWORD)
    assert root.get_prefix_response(PREFIX, count_only=True).count == 0


def test_expired_tokens_are_renewed_without_failures(auth_etcd, certs, tmp_out):
    """A put every 2.5 s on a connection whose token lives 1-2 s unused: the puts meet expired tokens.

    Even the first may, when the start after the pre-flight's authentication is slow.
    """

    def puts_answered(code: str) -> float:
        samples = fetch_metrics(auth_etcd.metrics_urls[0])
        return metric_sum(samples, "grpc_server_handled_total", grpc_method="Put", grpc_code=code)

    def expired_token_puts() -> float:
        return puts_answered("Unauthenticated")

    before = expired_token_puts()
    args = ("--etcd-timeout", "3", "--etcd-cacert", str(certs.ca), "--etcd-user", f"{USER}:{PASSWORD}")
    args += ("--etcd-user-rate", "0.4", "EtcdPutUser")
    # ended by Ctrl-C once a put has met an expired token, however long the start took; -t only bounds a run that
    # goes wrong
    with start_locust(*headless_args(auth_etcd, tmp_out / "run", *args, users=1, seconds=90), log_dir=tmp_out) as run:
        deadline = time.monotonic() + 60
        while expired_token_puts() - before < 1:
            assert run.poll() is None, run.output()[1][-3000:]
            assert time.monotonic() < deadline, f"no put met an expired token in 60 s\n{run.output()[1][-3000:]}"
            time.sleep(0.2)
        # then its retry on a renewed token went through (the renewal's Authenticate takes a while on a busy machine)
        ok_at_expiry = puts_answered("OK")
        while puts_answered("OK") <= ok_at_expiry:
            assert run.poll() is None, run.output()[1][-3000:]
            assert time.monotonic() < deadline, (
                f"no put went through after the expired token\n{run.output()[1][-3000:]}"
            )
            time.sleep(0.2)
        run.send_signal(signal.SIGINT)
        result = run.finish(timeout=60)
    puts = assert_clean_puts(result, tmp_out)
    renewed = expired_token_puts() - before
    print(f"\n{puts} puts, {renewed:g} of them met an expired token and were retried")
    # every put that met an expired token was retried on a renewed one and counted once, as a success
    assert puts >= renewed >= 1
    etcd_client(auth_etcd.endpoints[0], certs, user="root", password=ROOT_PASSWORD).delete_prefix(PREFIX)


# -- the local cluster's command line ----------------------------------------------------------------------


def test_the_cluster_command_line_starts_tls_members_with_a_limited_user(certs, tmp_path):
    tls_args = ["--cert-file", str(certs.server_cert), "--key-file", str(certs.server_key)]
    tls_args += ["--trusted-ca-file", str(certs.ca), "--client-cert-auth"]
    tls_args += ["--client-cert", str(certs.client_cert), "--client-key", str(certs.client_key)]
    auth_args = ["--root-password", ROOT_PASSWORD, "--user", f"{USER}:{PASSWORD}"]
    stdout_path = tmp_path / "stdout"
    with open(stdout_path, "w") as stdout:
        process = subprocess.Popen(
            [sys.executable, "-m", "etcd_users.local", *tls_args, *auth_args],
            cwd=REPO,
            stdout=stdout,
            stderr=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + 30
        while not (match := re.search(r"^LOCUST_ETCD_ENDPOINTS=(\S+)$", stdout_path.read_text(), re.MULTILINE)):
            assert process.poll() is None and time.monotonic() < deadline, stdout_path.read_text()
            time.sleep(0.1)
        [endpoint] = match.group(1).split(",")
        assert endpoint.startswith("https://127.0.0.1:")
        client = etcd_client(endpoint, certs, client_cert=True, user=USER, password=PASSWORD)
        client.put(PREFIX + "cli", "inside")
        assert client.get(PREFIX + "cli")[0] == b"inside"
        with pytest.raises(grpc.RpcError) as refused:
            client.put("/outside-the-prefix", "x")
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
