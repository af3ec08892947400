"""The ``--etcd-*`` options and their parsers (``etcd_users.settings``), pure: what each parser returns, and for bad
input the one-line message that names the option to fix (the run stops at start with it, exit code 2)."""

import argparse
import math
from dataclasses import replace
from pathlib import Path

import pytest
from certs import Certs, make_certs
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from etcd_users.core.arguments import shown
from etcd_users.core.features import OPTIONS
from etcd_users.judging.sla_specs import Gate, SlaError, parse_gate, parse_gates
from etcd_users.local import AUTO_COMPACTION_RETENTION, cluster_from_settings
from etcd_users.members.server_metrics import member_urls
from etcd_users.settings import (
    DEFAULT_PREFIX,
    Credentials,
    Endpoint,
    SettingsError,
    parse_endpoints,
    parse_prefix,
    settings_from_options,
)
from etcd_users.settings.connection import PEM_MAX_BYTES, REQUEST_OVERHEAD_BYTES
from etcd_users.settings.etcd import TXN_OP_OVERHEAD_BYTES, EtcdSettings
from etcd_users.settings.workload import MIX_OPERATIONS, parse_mix
from etcd_users.workload_model.keys import next_page_key

HTTPS = "https://10.0.0.1:2379"
LONG = "x" * 20000  # a pasted file, a runaway variable: never echoed whole
NOT_UTF8 = b"/nb\xff/".decode(errors="surrogateescape")  # what argparse makes of bytes that are not UTF-8


def options(**overrides) -> argparse.Namespace:
    """The parsed options as Locust hands them over: every default, then ``overrides``."""
    namespace = argparse.Namespace(**{option.dest: option.default for option in OPTIONS})
    unknown = set(overrides) - set(vars(namespace))
    assert not unknown, f"not an option: {unknown}"
    for dest, value in overrides.items():
        setattr(namespace, dest, value)
    return namespace


def one_line_error(error_type: type[Exception], call, *args) -> str:
    with pytest.raises(error_type) as raised:
        call(*args)
    message = str(raised.value)
    assert "\n" not in message, message
    assert len(message) < 700, message  # long input is quoted shortened
    return message


@pytest.fixture(scope="module")
def tls(tmp_path_factory) -> Path:
    """PEM files good and bad: a CA and a client pair (certs.make_certs), and what a user may give instead."""
    directory = tmp_path_factory.mktemp("tls")
    certs: Certs = make_certs(directory)
    ca_pem = certs.ca.read_bytes()
    (directory / "garbage.pem").write_bytes(b"not a certificate\n")
    (directory / "empty.pem").write_bytes(b"")
    # DER: the same CA, not base64 between BEGIN and END lines
    (directory / "ca.der").write_bytes(x509.load_pem_x509_certificate(ca_pem).public_bytes(serialization.Encoding.DER))
    (directory / "fake.pem").write_bytes(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    (directory / "big.pem").write_bytes(ca_pem + b"#" * PEM_MAX_BYTES)
    key = serialization.load_pem_private_key(certs.client_key.read_bytes(), password=None)
    (directory / "encrypted-key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"passphrase"),
        )
    )
    return directory


def with_tls_dir(value, tls_dir: Path):
    return value.replace("{tls}", str(tls_dir)) if isinstance(value, str) else value


# -- every option --


def test_every_option_has_a_typed_default_and_an_environment_variable():
    assert len({option.flag for option in OPTIONS}) == len(OPTIONS)
    for option in OPTIONS:
        assert option.flag.startswith("--etcd-"), option.flag
        assert option.env_var == "LOCUST_" + option.flag[2:].replace("-", "_").upper()
        assert isinstance(option.default, (str, int, float, bool)), option.flag
        if option.choices:
            assert option.default in option.choices, option.flag
    assert {option.flag for option in OPTIONS if option.secret} == {"--etcd-key", "--etcd-user"}


def test_the_defaults_are_valid_settings():
    settings = settings_from_options(options())
    assert settings.endpoints == ()  # none: a throwaway local etcd is started
    assert (settings.local_members, settings.target, settings.conns) == (1, "round-robin", 1)
    assert (settings.key_size, settings.val_size, settings.key_space_size) == (256, 1024, 10000)
    assert settings.prefix == DEFAULT_PREFIX.encode() == b"/locust-etcd/"
    assert settings.key_width == 256 - len(b"/locust-etcd/")
    assert (settings.sequential_keys, settings.allow_existing, settings.cleanup) == (False, False, False)
    assert (settings.consistency, settings.timeout, settings.user_rate) == ("l", 5.0, 0.0)
    assert (settings.txn_ops, settings.rw_ratio, settings.watch_streams, settings.watchers_per_stream) == (1, 1.0, 1, 1)
    assert settings.mix == (("put", 45.0), ("range", 30.0), ("delete", 25.0))
    assert settings.credentials == Credentials()
    monitoring = settings.monitoring
    assert (monitoring.metrics_urls, monitoring.metrics_interval, monitoring.skip_preflight, settings.gates.sla) == (
        (),
        5.0,
        False,
        (),
    )


def test_given_values_reach_the_settings(tls):
    settings = settings_from_options(
        options(
            etcd_endpoints="https://10.0.0.1:2379, https://10.0.0.2:2379/",
            etcd_target="leader",
            etcd_conns=4,
            etcd_prefix="/bench/",
            etcd_key_size=32,
            etcd_key_space_size=1000,
            etcd_consistency="s",
            etcd_txn_ops=1000,
            etcd_rw_ratio=0.0,
            etcd_mix="range/serializable:1",
            etcd_cacert=str(tls / "ca.pem"),
            etcd_cert=str(tls / "client.pem"),
            etcd_key=str(tls / "client-key.pem"),
            etcd_user="bench:pass:word",
            etcd_metrics_urls="http://10.0.0.1:2381/metrics,http://10.0.0.2:2381/metrics",
            etcd_sla="put:p99<15ms",
        )
    )
    assert settings.endpoints == (
        Endpoint("https://10.0.0.1:2379", secure=True),
        Endpoint("https://10.0.0.2:2379", secure=True),
    )
    assert (settings.target, settings.conns, settings.consistency) == ("leader", 4, "s")
    assert (settings.prefix, settings.key_width) == (b"/bench/", 32 - 7)
    assert (settings.txn_ops, settings.rw_ratio, settings.mix) == (1000, 0.0, (("range/serializable", 1.0),))
    pems = tuple((tls / name).read_bytes() for name in ("ca.pem", "client.pem", "client-key.pem"))
    assert settings.credentials == Credentials(*pems, user="bench", password="pass:word")  # split at the first ':'
    assert settings.monitoring.metrics_urls == ("http://10.0.0.1:2381/metrics", "http://10.0.0.2:2381/metrics")
    assert [gate.label for gate in settings.gates.sla] == ["put p99"]


def bad(dest: str, value, message: str, **context):
    """A bad value of ``dest`` (with ``context``: other options it needs), and the start of its one-line message.

    ``{tls}`` in a value or message is the directory of the ``tls`` fixture's files.
    """
    return pytest.param(dest, value, message, context, id=f"{dest}={shown(value, 40)}")


LIMIT = "larger than etcd's --max-request-bytes, 1.5 MiB by default (--etcd-max-request-bytes 1572864 here)"
RAISE = "or raise etcd's --max-request-bytes on every member and --etcd-max-request-bytes here to match"
NOT_FINITE = "is not a finite number; give one such as"
SHORT_LONG = "'" + "x" * 60 + "'… (20000 characters)"  # LONG as every message quotes it
BAD_OPTIONS = [
    bad("etcd_endpoints", "127.0.0.1:2379", "--etcd-endpoints: '127.0.0.1:2379' is not a client URL"),
    bad("etcd_endpoints", ",", "--etcd-endpoints: ',' has an empty entry; give client URLs separated by single "
        "commas, or nothing at all for a throwaway local etcd"),
    bad("etcd_endpoints", "http://a:1,,http://b:1", "--etcd-endpoints: 'http://a:1,,http://b:1' has an empty entry"),
    bad("etcd_endpoints", "http://[::1", "--etcd-endpoints: 'http://[::1' is not a client URL"),
    bad("etcd_endpoints", "http://" + LONG, f"--etcd-endpoints: {shown('http://' + LONG)} is not a client URL"),
    bad("etcd_endpoints", "http://\udcff:1", "--etcd-endpoints: 'http://\\udcff:1' is not UTF-8 text"),
    bad("etcd_disrupt_command", ["ls -l"], "--etcd-disrupt-command: 'ls -l' has no NAME= before its command; "
        "expected NAME=COMMAND"),
    bad("etcd_local_members", 6, "--etcd-local-members: 6 is not one of: 1, 2, 3, 4, 5"),
    bad("etcd_local_peer_rtt", "10", "--etcd-local-peer-rtt: '10' is not a round trip; write a duration with its "
        "unit, optionally with a jitter: 10ms, 10ms±2ms or 10ms+-2ms"),
    bad("etcd_local_zones", "a,a,a", "--etcd-local-zones: 'a,a,a' puts every member in one zone; give two zones at "
        "least, e.g. a,a,b"),
    bad("etcd_local_zone_rtt", "30", "--etcd-local-zone-rtt: '30' is not a round trip; write a duration with its "
        "unit, optionally with a jitter: 10ms, 10ms±2ms or 10ms+-2ms", etcd_local_zones="a,a,b"),
    bad("etcd_local_heartbeat", -1, "--etcd-local-heartbeat: -1 must be zero or more"),
    bad("etcd_local_election", 300, "--etcd-local-election: 300 ms is less than 5 heartbeats of 100 ms, which etcd "
        "refuses; give --etcd-local-heartbeat and --etcd-local-election together, e.g. 100 and 1000"),
    bad("etcd_local_compaction_retention", "5", "--etcd-local-compaction-retention: '5' is not a retention; give "
        "whole seconds, minutes or hours, e.g. 5s, 10m or 1h (0: no compaction)"),
    bad("etcd_local_compaction_retention", "500ms", "--etcd-local-compaction-retention: '500ms' is not a retention"),
    bad("etcd_local_compaction_retention", "-1s", "--etcd-local-compaction-retention: '-1s' is not a retention"),
    bad("etcd_local_binary", "etcd", "--etcd-local-binary: 'etcd' is neither a path nor a version; give the path of "
        "an etcd binary (with a '/', e.g. /usr/bin/etcd) or a version such as 3.4"),
    bad("etcd_upgrade_binary", "newest", "--etcd-upgrade-binary: 'newest' is neither a path nor a version; give the "
        "path of an etcd binary", etcd_disrupt="upgrade:all@3s"),
    bad("etcd_upgrade_binary", "3.5", "--etcd-upgrade-binary: '3.5' is never used; upgrade members to it with "
        "--etcd-disrupt 'upgrade:all@TIME' or leave it out"),
    bad("etcd_target", "follower", "--etcd-target: 'follower' is not one of: round-robin, leader"),
    bad("etcd_target", LONG, f"--etcd-target: {SHORT_LONG} is not one of: round-robin, leader"),
    bad("etcd_conns", 0, "--etcd-conns: 0 must be greater than zero"),
    bad("etcd_audit_wait", 0, "--etcd-audit-wait: 0 must be greater than zero"),
    bad("etcd_key_size", 12, "--etcd-key-size: 12 is too small for the prefix '/locust-etcd/' (13 bytes) plus a "
        "4-digit key counter; use at least 17 or a shorter --etcd-prefix"),
    bad("etcd_key_size", 2_000_000, f"--etcd-key-size: 2000000 makes every request {LIMIT}; use at most "
        f"{1572864 - REQUEST_OVERHEAD_BYTES} {RAISE}"),
    bad("etcd_val_size", -1, "--etcd-val-size: -1 must be zero or more"),
    # ran for 25 s with 7.9 GB RSS, sent nothing and exited 0
    bad("etcd_val_size", 2_000_000_000, f"--etcd-val-size: a put of a 256-byte key and a 2000000000-byte value is "
        f"{LIMIT}; use at most {1572864 - REQUEST_OVERHEAD_BYTES - 256} {RAISE}"),
    bad("etcd_key_space_size", 0, "--etcd-key-space-size: 0 must be greater than zero"),
    bad("etcd_prefix", "/", "--etcd-prefix: '/' would cover the whole key space; give a prefix such as "
        "'/locust-etcd/'"),
    bad("etcd_prefix", "", "--etcd-prefix: '' would cover the whole key space"),
    bad("etcd_prefix", "//", "--etcd-prefix: '//' would cover the whole key space"),
    bad("etcd_prefix", "/locust-etcd", "--etcd-prefix: '/locust-etcd' does not end in '/', and etcd's prefix range of "
        "'/locust-etcd' also covers other applications' keys such as '/locust-etcd-sentinel'; give '/locust-etcd/'"),
    bad("etcd_prefix", "/reg", "--etcd-prefix: '/reg' does not end in '/'"),  # would cover /registry/
    bad("etcd_prefix", NOT_UTF8, "--etcd-prefix: '/nb\\udcff/' is not UTF-8 text (the shell passed bytes that are "
        "not); give it in UTF-8"),
    bad("etcd_prefix", "/" + LONG, f"--etcd-prefix: {shown('/' + LONG)} does not end in '/'"),
    bad("etcd_consistency", "x", "--etcd-consistency: 'x' is not one of: l, s"),
    bad("etcd_timeout", 0.0, "--etcd-timeout: 0.0 must be greater than zero"),
    # "no etcd endpoint answered within nans"
    bad("etcd_timeout", math.nan, f"--etcd-timeout: nan {NOT_FINITE} 5.0"),
    bad("etcd_timeout", math.inf, f"--etcd-timeout: inf {NOT_FINITE} 5.0"),
    bad("etcd_timeout", -math.inf, f"--etcd-timeout: -inf {NOT_FINITE} 5.0"),
    bad("etcd_user_rate", -1.0, "--etcd-user-rate: -1.0 must be zero or more"),
    bad("etcd_user_rate", math.nan, f"--etcd-user-rate: nan {NOT_FINITE} 0.0"),  # a thousand tracebacks
    bad("etcd_user_rate", math.inf, f"--etcd-user-rate: inf {NOT_FINITE} 0.0"),
    bad("etcd_user_rate", 1e-320, "--etcd-user-rate: 1e-320 puts a request due only after forever"),
    bad("etcd_txn_ops", 0, "--etcd-txn-ops: 0 must be greater than zero"),
    bad("etcd_txn_ops", 10001, "--etcd-txn-ops: 10001 puts need as many distinct keys, but --etcd-key-space-size is "
        "10000"),
    bad("etcd_txn_ops", 2000, f"--etcd-txn-ops: a transaction of 2000 puts of 256+1024 bytes is {LIMIT}; use at most "
        f"{(1572864 - REQUEST_OVERHEAD_BYTES) // (256 + 1024 + TXN_OP_OVERHEAD_BYTES)} puts"),
    bad("etcd_rw_ratio", -0.5, "--etcd-rw-ratio: -0.5 must be zero or more"),
    bad("etcd_rw_ratio", math.nan, f"--etcd-rw-ratio: nan {NOT_FINITE} 1.0"),
    bad("etcd_rw_ratio", math.inf, f"--etcd-rw-ratio: inf {NOT_FINITE} 1.0"),
    bad("etcd_watch_streams", 0, "--etcd-watch-streams: 0 must be greater than zero"),
    bad("etcd_watchers_per_stream", -2, "--etcd-watchers-per-stream: -2 must be greater than zero"),
    bad("etcd_key_distribution", "pareto", "--etcd-key-distribution: 'pareto' is not a key distribution; give uniform, "
        "sequential, zipfian[:THETA] (0 < THETA < 1, e.g. zipfian:0.99), latest[:THETA] or "
        "hotspot[:HOT_FRACTION:HOT_OPS] (e.g. hotspot:0.2:0.8)"),
    bad("etcd_key_distribution", "zipfian:1", "--etcd-key-distribution: THETA 1 is outside (0, 1), where Gray et al.'s "
        "zipfian draws; give e.g. zipfian:0.99"),
    bad("etcd_key_distribution", "zipfian:nan", "--etcd-key-distribution: 'nan' in 'zipfian:nan' is not a finite "
        "number"),
    bad("etcd_key_distribution", "zipfian:", "--etcd-key-distribution: '' in 'zipfian:' is not a finite number"),
    bad("etcd_key_distribution", "hotspot:0.2", "--etcd-key-distribution: hotspot takes HOT_FRACTION:HOT_OPS or "
        "nothing; give e.g. hotspot:0.2:0.8"),
    bad("etcd_key_distribution", "hotspot:1:0.8", "--etcd-key-distribution: HOT_FRACTION must be in (0, 1) and HOT_OPS "
        "in [0, 1], 'hotspot:1:0.8' gives 1 and 0.8"),
    bad("etcd_key_distribution", "uniform:2", "--etcd-key-distribution: uniform takes no parameter"),
    bad("etcd_key_distribution", LONG, f"--etcd-key-distribution: {SHORT_LONG} is not a key distribution"),
    bad("etcd_key_distribution", "zipfian", "--etcd-sequential-keys: walks the keys in order, and "
        "--etcd-key-distribution asks for zipfian:0.99; give only one of them", etcd_sequential_keys=True),
    bad("etcd_ycsb", "G", "--etcd-ycsb: 'G' is not one of YCSB's core workloads; give one of A, B, C, D, E, F"),
    bad("etcd_ycsb", LONG, f"--etcd-ycsb: {SHORT_LONG} is not one of YCSB's core workloads"),
    bad("etcd_arrival", "burst", "--etcd-arrival: 'burst' is not one of: fixed, poisson"),
    bad("etcd_engine", "thread", "--etcd-engine: 'thread' is not one of: loop, greenlet"),
    bad("etcd_range_keys", 0, "--etcd-range-keys: 0 must be greater than zero"),
    bad("etcd_range_keys", 10001, "--etcd-range-keys: 10001 consecutive keys do not fit in --etcd-key-space-size "
        "10000; give at most 10000 or a larger key space"),
    bad("etcd_range_limit", -1, "--etcd-range-limit: -1 must be zero or more"),
    bad("etcd_range_limit", 10, "--etcd-range-limit: 10 limits a range of one key; give --etcd-range-keys N above 1 "
        "too"),
    bad("etcd_range_keys_only", True, "--etcd-range-keys-only: a --etcd-range-count-only range returns no keys at all; "
        "give only one of them", etcd_range_count_only=True),
    bad("etcd_range_paginate", True, "--etcd-range-paginate: pages need a size; give --etcd-range-limit N above 0 "
        "(Kubernetes lists 500)"),
    bad("etcd_range_paginate", True, "--etcd-range-paginate: lists the whole prefix, and --etcd-range-keys asks for "
        "ranges of 100 keys; give only one of them", etcd_range_limit=10, etcd_range_keys=100),
    bad("etcd_range_paginate", True, "--etcd-range-paginate: a --etcd-range-count-only range returns no last key to "
        "go on from; give only one of them", etcd_range_limit=10, etcd_range_count_only=True),
    bad("etcd_watch_keys", -1, "--etcd-watch-keys: -1 must be zero or more"),
    bad("etcd_watch_keys", 10001, "--etcd-watch-keys: 10001 keys are more than the key space's 10000"),
    bad("etcd_watch_start_rev", -(2**63), "--etcd-watch-start-rev: -9223372036854775808 is beyond etcd's 64-bit"),
    bad("etcd_watch_consume_delay", -0.5, "--etcd-watch-consume-delay: -0.5 must be zero or more"),
    bad("etcd_watch_slow_fraction", 1.5, "--etcd-watch-slow-fraction: 1.5 is not a share of the streams; give"),
    bad("etcd_mix", "put:45,scan:55", "--etcd-mix: 'scan:55' is not NAME:WEIGHT"),
    bad("etcd_mix", "put:nan,range:1", "--etcd-mix: 'put:nan' is not NAME:WEIGHT with a finite weight"),
    bad("etcd_mix", "put:inf", "--etcd-mix: 'put:inf' is not NAME:WEIGHT with a finite weight"),
    bad("etcd_mix", LONG, f"--etcd-mix: {SHORT_LONG} is not NAME:WEIGHT"),
    bad("etcd_cacert", "/nonexistent/ca.pem", "--etcd-cacert: cannot read '/nonexistent/ca.pem' (No such file or "
        "directory); give the path of a PEM file", etcd_endpoints=HTTPS),
    bad("etcd_cacert", "/" + LONG, "--etcd-cacert: cannot read '/xxx", etcd_endpoints=HTTPS),
    bad("etcd_cacert", "{tls}", "--etcd-cacert: cannot read '{tls}' (Is a directory)", etcd_endpoints=HTTPS),
    bad("etcd_cacert", "{tls}/garbage.pem", "--etcd-cacert: '{tls}/garbage.pem' is not PEM (no '-----BEGIN ' line); "
        "give the CA certificate in PEM, converted from DER with: openssl x509 -inform DER -in CA -out ca.pem",
        etcd_endpoints=HTTPS),
    bad("etcd_cacert", "{tls}/empty.pem", "--etcd-cacert: '{tls}/empty.pem' is not PEM", etcd_endpoints=HTTPS),
    bad("etcd_cacert", "{tls}/ca.der", "--etcd-cacert: '{tls}/ca.der' is not PEM", etcd_endpoints=HTTPS),
    bad("etcd_cacert", "{tls}/fake.pem", "--etcd-cacert: '{tls}/fake.pem' holds no certificate OpenSSL can read (",
        etcd_endpoints=HTTPS),
    bad("etcd_cacert", "{tls}/big.pem", f"--etcd-cacert: '{{tls}}/big.pem' is larger than {PEM_MAX_BYTES} bytes",
        etcd_endpoints=HTTPS),
    # silently ignored before: no endpoint used it
    bad("etcd_cacert", "{tls}/ca.pem", "--etcd-cacert: TLS files are for https:// endpoints, and --etcd-endpoints "
        "lists only http:// ones; give https://HOST:PORT endpoints or leave it out",
        etcd_endpoints="http://127.0.0.1:2379"),
    bad("etcd_cacert", "{tls}/ca.pem", "--etcd-cacert: TLS files are for https:// endpoints, and without "
        "--etcd-endpoints the tool starts a local etcd, which is plain http"),
    bad("etcd_cert", "client.pem", "--etcd-cert and --etcd-key: mutual TLS needs both the certificate and its key"),
    bad("etcd_cert", "{tls}/garbage.pem", "--etcd-cert: '{tls}/garbage.pem' is not PEM", etcd_endpoints=HTTPS,
        etcd_key="{tls}/client-key.pem"),
    bad("etcd_cert", "{tls}/client.pem", "--etcd-cert and --etcd-key: '{tls}/server-key.pem' is not the key of the "
        "certificate '{tls}/client.pem' (KEY_VALUES_MISMATCH); give the key that belongs to it",
        etcd_endpoints=HTTPS, etcd_key="{tls}/server-key.pem"),
    bad("etcd_cert", "{tls}/client.pem", "--etcd-cert and --etcd-key: the certificate '{tls}/client.pem' and the key "
        "'{tls}/ca.pem' cannot be loaded together (", etcd_endpoints=HTTPS, etcd_key="{tls}/ca.pem"),
    bad("etcd_key", "client-key.pem", "--etcd-cert and --etcd-key: mutual TLS needs both the certificate and its key"),
    bad("etcd_key", "{tls}/ca.der", "--etcd-key: '{tls}/ca.der' is not PEM (no '-----BEGIN ' line); give the "
        "client's private key in PEM, converted from DER with: openssl pkey -inform DER -in KEY -out key.pem",
        etcd_endpoints=HTTPS, etcd_cert="{tls}/client.pem"),
    bad("etcd_key", "{tls}/encrypted-key.pem", "--etcd-key: '{tls}/encrypted-key.pem' is encrypted and gRPC takes "
        "no passphrase; decrypt it with: openssl pkey -in KEY -out key.pem", etcd_endpoints=HTTPS,
        etcd_cert="{tls}/client.pem"),
    bad("etcd_key", "{tls}/client-key.pem", "--etcd-cert and --etcd-key: TLS files are for https:// endpoints",
        etcd_endpoints="http://127.0.0.1:2379", etcd_cert="{tls}/client.pem"),
    bad("etcd_user", "root", "--etcd-user: expected NAME:PASSWORD"),
    bad("etcd_user", ":secret", "--etcd-user: expected NAME:PASSWORD"),
    bad("etcd_user", "root:", "--etcd-user: expected NAME:PASSWORD"),
    bad("etcd_metrics_urls", "127.0.0.1:2381", "--etcd-metrics-urls: '127.0.0.1:2381' is not a URL; write "
        "http://HOST:PORT/metrics"),
    bad("etcd_metrics_urls", ",", "--etcd-metrics-urls: ',' has an empty entry; give URLs separated by single "
        "commas, or nothing at all for each client URL + /metrics"),
    bad("etcd_metrics_urls", "http://[::1", "--etcd-metrics-urls: 'http://[::1' is not a URL"),
    bad("etcd_metrics_interval", -1.0, "--etcd-metrics-interval: -1.0 must be zero or more"),
    bad("etcd_metrics_interval", math.nan, f"--etcd-metrics-interval: nan {NOT_FINITE} 5.0"),
    bad("etcd_compact_interval", -1.0, "--etcd-compact-interval: -1.0 must be zero or more"),
    bad("etcd_compact_interval", math.inf, f"--etcd-compact-interval: inf {NOT_FINITE} 0.0"),
    bad("etcd_profile_on_breach", -1.0, "--etcd-profile-on-breach: -1.0 must be zero or more"),
    bad("etcd_profile_on_breach", 301.0, "--etcd-profile-on-breach: 301.0 seconds is too long a profile; give at "
        "most 300 (e.g. 10), or 0 for none"),
    bad("etcd_prometheus_port", 65536, "--etcd-prometheus-port: 65536 is not a TCP port; give one from 1 to 65535 "
        "(e.g. 9647), or 0 for no exporter"),
    bad("etcd_prometheus_port", -1, "--etcd-prometheus-port: -1 is not a TCP port"),
    bad("etcd_prometheus_window", 0, "--etcd-prometheus-window: 0 seconds is outside 1 to 3600; give e.g. 10"),
    bad("etcd_prometheus_window", 86400, "--etcd-prometheus-window: 86400 seconds is outside 1 to 3600"),
    bad("etcd_max_request_bytes", 0, "--etcd-max-request-bytes: 0 must be greater than zero"),
    bad("etcd_max_request_bytes", 2**40, "--etcd-max-request-bytes: 1099511627776 is more than the 16777216 bytes "
        "(16 MiB) this tool's gRPC channels send"),
    bad("etcd_sla", "put:p99<<15", "--etcd-sla: 'put:p99<<15' is not a gate"),
    bad("etcd_sla", "p99<" + "9" * 400 + "ms", "--etcd-sla: '" + "p99<" + "9" * 56 + "'… (406 characters) has a "
        "threshold of 400 digits, beyond any number"),
    bad("etcd_sla", LONG, f"--etcd-sla: {SHORT_LONG} is not a gate"),
    bad("etcd_junit", "reports/", "--etcd-junit: 'reports/' names a directory; give a file path such as "
        "reports/junit.xml"),
    bad("etcd_junit", "out/..", "--etcd-junit: 'out/..' names a directory"),
    bad("etcd_junit", "out/" + "x" * 256 + ".xml", "--etcd-junit: 'out/" + "x" * 196 + "'… (264 characters) has a "
        "name longer than 255 bytes, which no file system takes"),
    bad("etcd_perfdash", "out/", "--etcd-perfdash: 'out/' names a directory; give a file path such as "
        "out/perfdash.json"),
    bad("etcd_k8s_objects", "pods", "--etcd-k8s-objects: 'pods' is not RESOURCE:COUNT"),
    bad("etcd_k8s_objects", "Pods:5", "--etcd-k8s-objects: 'Pods:5' is not RESOURCE:COUNT with a lower-case"),
    bad("etcd_k8s_objects", "pods:0", "--etcd-k8s-objects: 'pods:0' asks for 0 objects; give between 1 and"),
    bad("etcd_k8s_objects", "pods:1,pods:2", "--etcd-k8s-objects: 'pods' is listed twice"),
    bad("etcd_k8s_objects", "pods:1,,leases:2", "--etcd-k8s-objects: 'pods:1,,leases:2' has an empty entry"),
    bad("etcd_k8s_namespaces", 0, "--etcd-k8s-namespaces: 0 must be greater than zero"),
    bad("etcd_k8s_namespaces", 10001, "--etcd-k8s-namespaces: 10001 is more than 10000; give at most 10000"),
    bad("etcd_k8s_object_size", "8192:2048", "--etcd-k8s-object-size: '8192:2048' is not MIN:MAX"),
    bad("etcd_k8s_object_size", "-1", "--etcd-k8s-object-size: '-1' is not MIN:MAX"),
    bad("etcd_k8s_object_size", "2000000", "--etcd-k8s-object-size: objects of 2000000 bytes are larger than "
        "etcd's --max-request-bytes"),
    bad("etcd_disrupt", "defrag@soon", "--etcd-disrupt: 'defrag@soon' has no time after '@'"),
    bad("etcd_disrupt", LONG, f"--etcd-disrupt: {SHORT_LONG} is not an item of the schedule"),
    bad("etcd_k8s_page_size", 0, "--etcd-k8s-page-size: 0 must be greater than zero"),
    bad("etcd_k8s_read_mix", "get:5,watch:3", "--etcd-k8s-read-mix: 'watch:3' is not NAME:WEIGHT"),
    bad("etcd_k8s_read_mix", "get:0", "--etcd-k8s-read-mix: give at least one name with a positive weight"),
    bad("etcd_k8s_read_mix", "get:1,get:2", "--etcd-k8s-read-mix: 'get' is listed twice"),
    bad("etcd_k8s_write_mix", "update:-1", "--etcd-k8s-write-mix: 'update:-1' is not NAME:WEIGHT"),
    bad("etcd_k8s_write_mix", "put:1", "--etcd-k8s-write-mix: 'put:1' is not NAME:WEIGHT with a finite weight of "
        "zero or more and a name among update, delete, create"),
    bad("etcd_k8s_rw_ratio", -1.0, "--etcd-k8s-rw-ratio: -1.0 must be zero or more"),
    bad("etcd_k8s_nodes", 0, "--etcd-k8s-nodes: 0 must be greater than zero"),
    bad("etcd_k8s_nodes", 2_000_000, "--etcd-k8s-nodes: 2000000 is more than 1000000"),
    bad("etcd_k8s_lease_period", 0.0, "--etcd-k8s-lease-period: 0.0 must be greater than zero"),
    bad("etcd_k8s_compact_interval", -5.0, "--etcd-k8s-compact-interval: -5.0 must be zero or more"),
    bad("etcd_k8s_prefill_seconds", 0.0, "--etcd-k8s-prefill-seconds: 0.0 must be greater than zero"),
    bad("etcd_tail", -1, "--etcd-tail: -1 must be zero or more"),
]  # fmt: skip
# options without a bad value: flags, which are on or off
NO_BAD_VALUE = {
    *("--etcd-sequential-keys", "--etcd-allow-existing", "--etcd-cleanup", "--etcd-skip-preflight"),
    "--etcd-range-count-only",
    "--etcd-local-pprof",
    "--etcd-watch-prev-kv",
    "--etcd-watch-progress-notify",
    "--etcd-k8s-compact-allowed",
    "--etcd-disrupt-allowed",
    "--etcd-skip-audit",
}


@pytest.mark.parametrize("dest, value, message, context", BAD_OPTIONS)
def test_a_bad_value_is_one_line_naming_its_option(dest, value, message, context, tls):
    overrides = {name: with_tls_dir(other, tls) for name, other in context.items()}
    overrides[dest] = with_tls_dir(value, tls)
    error = one_line_error(SettingsError, settings_from_options, options(**overrides))
    assert error.startswith(with_tls_dir(message, tls)), error


@pytest.mark.parametrize(
    ("given", "retention", "describe"),
    [
        ("", "5s", "history compacted every 5s"),
        ("0", None, "no auto-compaction"),
        ("10m", "10m", "history compacted every 10m"),
        (" 1h ", "1h", "history compacted every 1h"),
    ],
)
def test_the_local_etcd_compacts_with_the_retention_given_and_never_with_0(given, retention, describe):
    [declared] = [option for option in OPTIONS if option.flag == "--etcd-local-compaction-retention"]
    assert f"Empty: {AUTO_COMPACTION_RETENTION}." in declared.help  # what its reference says of the default
    settings = settings_from_options(options(etcd_local_compaction_retention=given))
    cluster, _ = cluster_from_settings(settings, 1)
    assert cluster.auto_compaction_retention == retention
    assert describe in cluster.describe_space()
    flags = cluster._space_args()
    assert ("--auto-compaction-retention" in flags) == (retention is not None)
    if retention:
        assert flags[flags.index("--auto-compaction-retention") + 1] == retention


def test_every_option_that_can_be_wrong_has_a_bad_value_above():
    flags = {"--" + param.values[0].replace("_", "-") for param in BAD_OPTIONS}
    assert flags | NO_BAD_VALUE == {option.flag for option in OPTIONS}
    assert all(isinstance(option.default, bool) for option in OPTIONS if option.flag in NO_BAD_VALUE)


FLOAT_OPTIONS = [option for option in OPTIONS if isinstance(option.default, float)]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("option", FLOAT_OPTIONS, ids=lambda option: option.flag)
def test_every_number_option_refuses_nan_and_infinity(option, value):
    # nan and inf pass every check made with < or ==
    error = one_line_error(SettingsError, settings_from_options, options(**{option.dest: value}))
    assert error == f"{option.flag}: {value!r} {NOT_FINITE} {option.default!r}"


TEXT_OPTIONS = [option for option in OPTIONS if isinstance(option.default, str)]


@pytest.mark.parametrize("option", TEXT_OPTIONS, ids=lambda option: option.flag)
def test_every_text_option_refuses_text_that_is_not_utf8_in_one_line(option):
    error = one_line_error(SettingsError, settings_from_options, options(**{option.dest: NOT_UTF8}))
    assert error.startswith(f"{option.flag}: "), error
    assert "is not UTF-8 text" in error
    if option.secret:
        assert "nb" not in error  # a secret is never quoted
    else:
        assert "'/nb\\udcff/'" in error


@pytest.mark.parametrize("option", TEXT_OPTIONS, ids=lambda option: option.flag)
def test_every_text_option_quotes_a_20_kb_value_shortened(option):
    overrides = {option.dest: LONG}
    if option.flag in ("--etcd-cacert", "--etcd-cert", "--etcd-key"):
        overrides.update(etcd_endpoints=HTTPS, etcd_cert=LONG, etcd_key=LONG)
    error = one_line_error(SettingsError, settings_from_options, options(**overrides))
    assert error.startswith(("--etcd-", "--etcd-cert and --etcd-key")), error
    assert "x" * 201 not in error


def test_a_long_input_is_shown_by_its_start_and_length():
    assert shown("/locust-etcd/") == "'/locust-etcd/'"
    assert shown(LONG) == SHORT_LONG
    assert shown(LONG.encode()) == "b'" + "x" * 60 + "'… (20000 bytes)"
    assert shown(12) == "12"
    assert shown(10**5000) == "a number of 16610 bits"  # str() refuses more than 4300 digits


# -- --etcd-prefix: a directory --


def test_a_prefix_is_a_directory():
    assert parse_prefix("/locust-etcd/") == b"/locust-etcd/"
    assert parse_prefix("/a/b/") == b"/a/b/"
    assert parse_prefix("/é/") == "/é/".encode()
    assert parse_prefix("nb/") == b"nb/"  # no leading slash needed: etcd keys are bytes


def test_a_prefix_refusal_names_the_option_it_checks():
    error = one_line_error(SettingsError, parse_prefix, "/nb", "--user-prefix")
    assert error == (
        "--user-prefix: '/nb' does not end in '/', and etcd's prefix range of '/nb' also covers other applications' "
        "keys such as '/nb-sentinel'; give '/nb/'"
    )


# -- sizes within etcd's --max-request-bytes --


def test_a_put_of_the_largest_value_etcd_takes_is_accepted_and_one_byte_more_refused():
    largest = 1572864 - REQUEST_OVERHEAD_BYTES - 256
    assert settings_from_options(options(etcd_val_size=largest)).val_size == largest
    error = one_line_error(SettingsError, settings_from_options, options(etcd_val_size=largest + 1))
    assert error.startswith(f"--etcd-val-size: a put of a 256-byte key and a {largest + 1}-byte value is larger")


def test_the_user_name_counts_in_a_request():
    largest = 1572864 - REQUEST_OVERHEAD_BYTES - 256
    error = one_line_error(SettingsError, settings_from_options, options(etcd_val_size=largest, etcd_user="bench:pw"))
    assert error.endswith(f"use at most {largest - len('bench')} {RAISE}")


def test_a_raised_request_limit_takes_larger_values_and_transactions():
    settings = settings_from_options(
        options(etcd_val_size=4 * 1024 * 1024, etcd_max_request_bytes=8 * 1024 * 1024, etcd_txn_ops=1)
    )
    assert settings.max_request_bytes == 8 * 1024 * 1024
    most = (1572864 - REQUEST_OVERHEAD_BYTES + TXN_OP_OVERHEAD_BYTES) // (256 + 1024 + TXN_OP_OVERHEAD_BYTES)
    assert settings_from_options(options(etcd_txn_ops=most)).txn_ops == most
    error = one_line_error(SettingsError, settings_from_options, options(etcd_txn_ops=most + 1))
    assert error.startswith(f"--etcd-txn-ops: a transaction of {most + 1} puts of 256+1024 bytes is larger")
    assert f"use at most {most} puts" in error


# -- TLS files --


def test_https_endpoints_take_a_ca_alone_or_a_client_pair(tls):
    settings = settings_from_options(
        options(etcd_endpoints=f"{HTTPS},http://10.0.0.2:2379", etcd_cacert=str(tls / "ca.pem"))
    )
    assert settings.credentials.root_certificates == (tls / "ca.pem").read_bytes()
    settings = settings_from_options(
        options(etcd_endpoints=HTTPS, etcd_cert=str(tls / "client.pem"), etcd_key=str(tls / "client-key.pem"))
    )
    assert settings.credentials.private_key == (tls / "client-key.pem").read_bytes()


@pytest.mark.parametrize("dest", ["etcd_cacert", "etcd_cert", "etcd_key"])
def test_a_pem_file_that_cannot_be_read_is_named_with_its_option(dest, tls, tmp_path):
    paths = {"etcd_cacert": tls / "ca.pem", "etcd_cert": tls / "client.pem", "etcd_key": tls / "client-key.pem"}
    paths[dest] = tmp_path / "missing.pem"
    overrides = {name: str(path) for name, path in paths.items()}
    error = one_line_error(SettingsError, settings_from_options, options(etcd_endpoints=HTTPS, **overrides))
    flag = "--" + dest.replace("_", "-")
    assert error == (
        f"{flag}: cannot read '{tmp_path / 'missing.pem'}' (No such file or directory); give the path of a PEM file"
    )


# -- --etcd-endpoints --


def test_endpoints_are_client_urls():
    assert parse_endpoints("") == parse_endpoints("  ") == []
    assert parse_endpoints(" http://127.0.0.1:2379 ,https://etcd-1.example:2379/, http://[::1]:23790") == [
        Endpoint("http://127.0.0.1:2379", secure=False),
        Endpoint("https://etcd-1.example:2379", secure=True),
        Endpoint("http://[::1]:23790", secure=False),
    ]
    assert [endpoint.target for endpoint in parse_endpoints("https://etcd-1.example:2379,http://[::1]:23790")] == [
        "etcd-1.example:2379",
        "[::1]:23790",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "127.0.0.1:2379",  # no scheme
        "ftp://127.0.0.1:2379",
        "http://127.0.0.1",  # no port
        "http://127.0.0.1:99999",  # not a port
        "http://127.0.0.1:2379/v3",  # a path
        "http://:2379",  # no host
        "http://127.0.0.1:2379,unix:///tmp/etcd.sock",
        "http://[::1",  # urlsplit raises on it
        "http://[::1]",
        "http://127.0.0.1:0",
        "http://user:secret@127.0.0.1:2379",
        "http://127.0.0.1:2379?x=1",
        "http://127.0.0.1:2379#x",
        f"http://{'h' * 254}:2379",  # longer than any DNS name
    ],
)
def test_an_endpoint_that_is_not_a_client_url_is_named(text):
    error = one_line_error(SettingsError, parse_endpoints, text)
    bad = text.split(",")[-1]
    assert error == (
        f"--etcd-endpoints: {shown(bad)} is not a client URL; write http://HOST:PORT or https://HOST:PORT "
        "(IPv6: http://[::1]:2379), comma-separated"
    )


@pytest.mark.parametrize("text", [",", " , ", "http://a:1,,http://b:1", "http://a:1,", ",http://a:1"])
def test_an_endpoint_list_with_an_empty_entry_is_refused_not_a_local_etcd(text):
    error = one_line_error(SettingsError, parse_endpoints, text)
    assert error == (
        f"--etcd-endpoints: {text!r} has an empty entry; give client URLs separated by single commas, or nothing at "
        "all for a throwaway local etcd"
    )


def test_an_endpoint_listed_twice_is_refused():
    error = one_line_error(SettingsError, parse_endpoints, "http://127.0.0.1:2379,http://127.0.0.1:2379/")
    assert error == "--etcd-endpoints: an endpoint is listed twice"


# -- --etcd-mix --


def test_a_mix_keeps_its_order_and_weights():
    assert parse_mix("--etcd-mix", "put:45,range:30,delete:25") == (("put", 45.0), ("range", 30.0), ("delete", 25.0))
    assert parse_mix("--etcd-mix", " put:1.5 ,, txn-put:0,range/linearizable:2") == (
        ("put", 1.5),
        ("txn-put", 0.0),
        ("range/linearizable", 2.0),
    )
    assert {name for name, _ in parse_mix("--etcd-mix", ",".join(f"{name}:1" for name in MIX_OPERATIONS))} == set(
        MIX_OPERATIONS
    )


def mix(text: str):
    return parse_mix("--etcd-mix", text)


@pytest.mark.parametrize("item", ["scan:5", "put", "put:", "put:x", "put:-1", "PUT:5", "range/stale:1"])
def test_a_mix_item_that_is_not_name_weight_is_named(item):
    error = one_line_error(SettingsError, mix, f"put:45,{item}")
    assert error == (
        f"--etcd-mix: {item!r} is not NAME:WEIGHT with a finite weight of zero or more and a name among "
        "put, range, range/linearizable, range/serializable, delete, txn-put"
    )


@pytest.mark.parametrize("weight", ["nan", "NaN", "inf", "-inf", "infinity", "1e999"])
def test_a_mix_weight_that_is_not_finite_is_refused(weight):
    # nan passed "< 0" and made thousands of IndexErrors (bisect into nan) and no request
    error = one_line_error(SettingsError, mix, f"put:{weight},range:1")
    assert error.startswith(f"--etcd-mix: 'put:{weight}' is not NAME:WEIGHT with a finite weight"), error


def test_mix_weights_that_add_up_to_infinity_are_refused():
    error = one_line_error(SettingsError, mix, "put:1e308,range:1e308")
    assert error == "--etcd-mix: the weights add up to more than a number holds; give e.g. put:45,range:30"


@pytest.mark.parametrize("text", ["", " , ", "put:0", "put:0,range:0"])
def test_a_mix_needs_a_positive_weight(text):
    error = one_line_error(SettingsError, mix, text)
    assert error == "--etcd-mix: give at least one name with a positive weight, e.g. put:45,range:30"


# -- --etcd-metrics-urls and --etcd-metrics-interval --


def test_new_options_have_defaults_and_env_vars():
    flags = {option.flag: option for option in OPTIONS}
    assert flags["--etcd-metrics-interval"].default == 5.0
    assert flags["--etcd-metrics-interval"].env_var == "LOCUST_ETCD_METRICS_INTERVAL"
    assert flags["--etcd-metrics-urls"].default == ""
    assert flags["--etcd-skip-preflight"].default is False
    settings = settings_from_options(options(etcd_endpoints="http://127.0.0.1:1,http://127.0.0.1:2"))
    assert member_urls(settings) == [
        ("http://127.0.0.1:1", "http://127.0.0.1:1/metrics"),
        ("http://127.0.0.1:2", "http://127.0.0.1:2/metrics"),
    ]


def test_metrics_urls_are_aligned_with_the_endpoints():
    settings = settings_from_options(
        options(etcd_endpoints="https://10.0.0.1:2379", etcd_metrics_urls="http://10.0.0.1:2381/metrics")
    )
    assert member_urls(settings) == [("https://10.0.0.1:2379", "http://10.0.0.1:2381/metrics")]
    with pytest.raises(SettingsError, match="--etcd-metrics-urls: 2 URLs for 1 --etcd-endpoints"):
        settings_from_options(
            options(etcd_endpoints="http://127.0.0.1:1", etcd_metrics_urls="http://a:1/metrics,http://b:1/metrics")
        )
    with pytest.raises(SettingsError, match="--etcd-metrics-urls: '127.0.0.1:2381' is not a URL"):
        settings_from_options(options(etcd_endpoints="http://127.0.0.1:1", etcd_metrics_urls="127.0.0.1:2381"))
    with pytest.raises(SettingsError, match="--etcd-metrics-interval"):
        settings_from_options(options(etcd_metrics_interval=-1.0))


# -- --etcd-sla: the gate grammar (the verdicts are tests/unit/test_sla.py) --

GOOD = [
    ("put:p99<15ms", Gate("put:p99<15ms", "put", "percentile", 99.0, "<", 15.0, "ms")),
    (
        "range/serializable:p99.9<10ms",
        Gate("range/serializable:p99.9<10ms", "range/serializable", "percentile", 99.9, "<", 10.0, "ms"),
    ),
    ("p95<=80ms", Gate("p95<=80ms", None, "percentile", 95.0, "<=", 80.0, "ms")),
    ("*:p99<20ms", Gate("*:p99<20ms", None, "percentile", 99.0, "<", 20.0, "ms")),
    ("put:p999 < 2.5 s", Gate("put:p999 < 2.5 s", "put", "percentile", 99.9, "<", 2.5, "s")),
    ("p9999<800us", Gate("p9999<800us", None, "percentile", 99.99, "<", 800.0, "us")),
    ("txn-put:max<1S", Gate("txn-put:max<1S", "txn-put", "max", None, "<", 1.0, "s")),
    ("mean<2ms", Gate("mean<2ms", None, "mean", None, "<", 2.0, "ms")),
    ("errors<0.1%", Gate("errors<0.1%", None, "errors", None, "<", 0.1, "%")),
    ("put:errors<1%", Gate("put:errors<1%", "put", "errors", None, "<", 1.0, "%")),
    ("errors<=0", Gate("errors<=0", None, "errors", None, "<=", 0.0, "")),
    ("qps>1000", Gate("qps>1000", None, "qps", None, ">", 1000.0, "")),
    ("put:qps>=50/s", Gate("put:qps>=50/s", "put", "qps", None, ">=", 50.0, "")),
]


@pytest.mark.parametrize("text, gate", GOOD, ids=[text for text, _ in GOOD])
def test_gates_parse(text, gate):
    assert parse_gate(text) == gate


def test_the_issue_example_parses_into_three_gates():
    gates = parse_gates("put:p99<15ms,range/serializable:p99.9<10ms,errors<0.1%")
    assert [(gate.label, gate.limit) for gate in gates] == [
        ("put p99", "< 15ms"),
        ("range/serializable p99.9", "< 10ms"),
        ("Aggregated errors", "< 0.1%"),
    ]
    assert parse_gates("") == parse_gates(" , ") == ()


BAD = [
    ("put:p99<<15", "'put:p99<<15' is not a gate"),
    ("put:p99=15ms", "'put:p99=15ms' is not a gate"),
    ("put:p99<", "'put:p99<' is not a gate"),
    ("put:p99<15", "'put:p99<15' has no unit (latencies take us, ms or s)"),
    ("put:p99<15kb", "'put:p99<15kb' has the unit 'kb' (latencies take us, ms or s)"),
    ("put:latency<15ms", "'put:latency<15ms' has an unknown metric 'latency'"),
    ("p101<1ms", "'p101<1ms' asks for percentile 101, outside 0-100"),
    ("errors<5ms", "'errors<5ms' has the unit 'ms' (errors take % for a share, none for a count)"),
    ("errors<150%", "'errors<150%' asks for more than 100% of errors"),
    ("qps>10ms", "'qps>10ms' has the unit 'ms' (qps takes none: requests per second)"),
]


@pytest.mark.parametrize("text, why", BAD, ids=[text for text, _ in BAD])
def test_a_malformed_gate_is_one_line_naming_it(text, why):
    with pytest.raises(SlaError) as raised:
        parse_gates(f"errors<1%,{text}")
    message = str(raised.value)
    assert message.startswith(f"--etcd-sla: {why}")
    assert ": expected NAME:METRIC<VALUE such as put:p99<15ms" in message
    assert "\n" not in message
    assert isinstance(raised.value, SettingsError)  # so the run stops at start with exit code 2


def test_a_paged_list_is_named_by_its_page_size_and_goes_on_after_the_last_key():
    settings = settings_from_options(options(etcd_range_paginate=True, etcd_range_limit=500))
    assert (settings.range_name, settings.list_name) == ("page 500", "list 500")
    keys_only = settings_from_options(options(etcd_range_paginate=True, etcd_range_limit=2, etcd_range_keys_only=True))
    assert (keys_only.range_name, keys_only.list_name) == ("page 2/keys-only", "list 2/keys-only")
    # the smallest key after the last one: nothing between them is skipped, the last one is not read twice
    last = b"/locust-etcd/0042"
    assert last < next_page_key(last) < last + b"\x00\x00" < b"/locust-etcd/0043"


def test_a_process_parses_one_set_of_options_once(monkeypatch):
    # the master's checks, a run's start, the users' session and the audit each ask; etcd's settings are parsed once
    parsed = []
    build = EtcdSettings.build.__func__
    monkeypatch.setattr(
        EtcdSettings, "build", classmethod(lambda cls, *args, **kw: parsed.append(1) or build(cls, *args, **kw))
    )
    given = options(etcd_val_size=2000)
    first = settings_from_options(given)
    assert settings_from_options(given) is first and settings_from_options(options(etcd_val_size=2000)) is first
    assert len(parsed) == 1
    given.etcd_endpoints = HTTPS  # the master writes the local etcd's endpoints back: other options, parsed again
    assert settings_from_options(given).endpoints[0].url == HTTPS and len(parsed) == 2


def test_each_feature_with_options_of_its_own_is_a_slice_of_the_run_s_settings():
    from etcd_users.core.features import features

    settings = settings_from_options(options(etcd_audit_wait=7.0))
    slices = [feature.options for feature in features() if feature.options is not None and feature.options.SLICE]
    assert [group.SLICE for group in slices] == list(settings.slices)
    assert {"gates", "audit", "disruptions", "k8s", "watch"} <= set(settings.slices)
    assert settings.audit is settings.slices["audit"] and settings.audit.wait == 7.0
    assert settings.with_slice(replace(settings.audit, wait=1.0)).audit.wait == 1.0 and settings.audit.wait == 7.0
    with pytest.raises(AttributeError, match="no feature's options have that SLICE"):
        assert settings.toy is None
