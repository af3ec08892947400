"""The ``--etcd-*`` options and their parsers (``etcd_users.settings``), pure: what each parser returns, and for bad
input the one-line message that names the option to fix (the run stops at start with it, exit code 2)."""

import argparse

import pytest

from etcd_users.reporting.server_metrics import member_urls
from etcd_users.settings import (
    DEFAULT_PREFIX,
    MIX_OPERATIONS,
    OPTIONS,
    Credentials,
    Endpoint,
    Gate,
    SettingsError,
    SlaError,
    parse_endpoints,
    parse_gate,
    parse_gates,
    parse_mix,
    settings_from_options,
)


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
    return message


# -- every option --


def test_every_option_has_a_typed_default_and_an_environment_variable():
    assert len({option.flag for option in OPTIONS}) == len(OPTIONS)
    for option in OPTIONS:
        assert option.flag.startswith("--etcd-"), option.flag
        assert option.env_var == option.flag[2:].replace("-", "_").upper()
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
    assert (settings.metrics_urls, settings.metrics_interval, settings.skip_preflight, settings.sla) == (
        (),
        5.0,
        False,
        (),
    )


def test_given_values_reach_the_settings(tmp_path):
    for name in ("ca", "cert", "key"):
        (tmp_path / f"{name}.pem").write_bytes(f"-----{name}-----".encode())
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
            etcd_cacert=str(tmp_path / "ca.pem"),
            etcd_cert=str(tmp_path / "cert.pem"),
            etcd_key=str(tmp_path / "key.pem"),
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
    pems = (b"-----ca-----", b"-----cert-----", b"-----key-----")
    assert settings.credentials == Credentials(*pems, user="bench", password="pass:word")  # split at the first ':'
    assert settings.metrics_urls == ("http://10.0.0.1:2381/metrics", "http://10.0.0.2:2381/metrics")
    assert [gate.label for gate in settings.sla] == ["put p99"]


# (option's dest, bad value, the message's start: the option's flag and why)
BAD_OPTIONS = [
    ("etcd_endpoints", "127.0.0.1:2379", "--etcd-endpoints: '127.0.0.1:2379' is not a client URL"),
    ("etcd_local_members", 2, "--etcd-local-members: 2 is not 1 or 3"),
    ("etcd_target", "follower", "--etcd-target: 'follower' is not one of: round-robin, leader"),
    ("etcd_conns", 0, "--etcd-conns: 0 must be greater than zero"),
    ("etcd_key_size", 12, "--etcd-key-size: 12 is too small for the prefix '/locust-etcd/' (13 bytes) plus a "
     "4-digit key counter; use at least 17 or a shorter --etcd-prefix"),
    ("etcd_val_size", -1, "--etcd-val-size: -1 must be zero or more"),
    ("etcd_key_space_size", 0, "--etcd-key-space-size: 0 must be greater than zero"),
    ("etcd_prefix", "/", "--etcd-prefix: '/' would cover the whole key space; give a prefix such as '/locust-etcd/'"),
    ("etcd_prefix", "", "--etcd-prefix: '' would cover the whole key space"),
    ("etcd_prefix", "//", "--etcd-prefix: '//' would cover the whole key space"),
    ("etcd_consistency", "x", "--etcd-consistency: 'x' is not 'l' or 's'"),
    ("etcd_timeout", 0.0, "--etcd-timeout: 0.0 must be greater than zero"),
    ("etcd_user_rate", -1.0, "--etcd-user-rate: -1.0 must be zero or more"),
    ("etcd_txn_ops", 0, "--etcd-txn-ops: 0 must be greater than zero"),
    ("etcd_txn_ops", 10001, "--etcd-txn-ops: 10001 puts need as many distinct keys, but --etcd-key-space-size is "
     "10000"),
    ("etcd_rw_ratio", -0.5, "--etcd-rw-ratio: -0.5 must be zero or more"),
    ("etcd_watch_streams", 0, "--etcd-watch-streams: 0 must be greater than zero"),
    ("etcd_watchers_per_stream", -2, "--etcd-watchers-per-stream: -2 must be greater than zero"),
    ("etcd_mix", "put:45,scan:55", "--etcd-mix: 'scan:55' is not NAME:WEIGHT"),
    ("etcd_cacert", "/nonexistent/ca.pem", "--etcd-cacert: cannot read '/nonexistent/ca.pem' (No such file or "
     "directory); give the path of a PEM file"),
    ("etcd_cert", "client.pem", "--etcd-cert and --etcd-key: mutual TLS needs both the certificate and its key"),
    ("etcd_key", "client-key.pem", "--etcd-cert and --etcd-key: mutual TLS needs both the certificate and its key"),
    ("etcd_user", "root", "--etcd-user: expected NAME:PASSWORD"),
    ("etcd_user", ":secret", "--etcd-user: expected NAME:PASSWORD"),
    ("etcd_user", "root:", "--etcd-user: expected NAME:PASSWORD"),
    ("etcd_metrics_urls", "127.0.0.1:2381", "--etcd-metrics-urls: '127.0.0.1:2381' is not a URL; write "
     "http://HOST:PORT/metrics"),
    ("etcd_metrics_interval", -1.0, "--etcd-metrics-interval: -1.0 must be zero or more"),
    ("etcd_compact_interval", -1.0, "--etcd-compact-interval: -1.0 must be zero or more"),
    ("etcd_max_request_bytes", 0, "--etcd-max-request-bytes: 0 must be greater than zero"),
    ("etcd_sla", "put:p99<<15", "--etcd-sla: 'put:p99<<15' is not a gate"),
]  # fmt: skip
# options without a bad value: flags, which are on or off
NO_BAD_VALUE = {"--etcd-sequential-keys", "--etcd-allow-existing", "--etcd-cleanup", "--etcd-skip-preflight"}


@pytest.mark.parametrize("dest, value, message", BAD_OPTIONS, ids=[f"{d}={v!r}" for d, v, _ in BAD_OPTIONS])
def test_a_bad_value_is_one_line_naming_its_option(dest, value, message):
    error = one_line_error(SettingsError, settings_from_options, options(**{dest: value}))
    assert error.startswith(message), error


def test_every_option_that_can_be_wrong_has_a_bad_value_above():
    flags = {"--" + dest.replace("_", "-") for dest, _, _ in BAD_OPTIONS}
    assert flags | NO_BAD_VALUE == {option.flag for option in OPTIONS}
    assert all(isinstance(option.default, bool) for option in OPTIONS if option.flag in NO_BAD_VALUE)


@pytest.mark.parametrize("dest", ["etcd_cacert", "etcd_cert", "etcd_key"])
def test_a_pem_file_that_cannot_be_read_is_named_with_its_option(dest, tmp_path):
    paths = {name: tmp_path / f"{name}.pem" for name in ("etcd_cacert", "etcd_cert", "etcd_key")}
    for path in paths.values():
        path.write_bytes(b"pem")
    paths[dest] = tmp_path / "missing.pem"
    error = one_line_error(
        SettingsError, settings_from_options, options(**{name: str(path) for name, path in paths.items()})
    )
    flag = "--" + dest.replace("_", "-")
    assert error == (
        f"{flag}: cannot read '{tmp_path / 'missing.pem'}' (No such file or directory); give the path of a PEM file"
    )


# -- --etcd-endpoints --


def test_endpoints_are_client_urls():
    assert parse_endpoints("") == parse_endpoints(" , ") == []
    assert parse_endpoints(" http://127.0.0.1:2379 ,https://etcd-1.example:2379/,, http://[::1]:23790") == [
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
    ],
)
def test_an_endpoint_that_is_not_a_client_url_is_named(text):
    error = one_line_error(SettingsError, parse_endpoints, text)
    bad = text.split(",")[-1]
    assert error == (
        f"--etcd-endpoints: {bad!r} is not a client URL; write http://HOST:PORT or https://HOST:PORT, comma-separated"
    )


def test_an_endpoint_listed_twice_is_refused():
    error = one_line_error(SettingsError, parse_endpoints, "http://127.0.0.1:2379,http://127.0.0.1:2379/")
    assert error == "--etcd-endpoints: an endpoint is listed twice"


# -- --etcd-mix --


def test_a_mix_keeps_its_order_and_weights():
    assert parse_mix("put:45,range:30,delete:25") == (("put", 45.0), ("range", 30.0), ("delete", 25.0))
    assert parse_mix(" put:1.5 ,, txn-put:0,range/linearizable:2") == (
        ("put", 1.5),
        ("txn-put", 0.0),
        ("range/linearizable", 2.0),
    )
    assert {name for name, _ in parse_mix(",".join(f"{name}:1" for name in MIX_OPERATIONS))} == set(MIX_OPERATIONS)


@pytest.mark.parametrize("item", ["scan:5", "put", "put:", "put:x", "put:-1", "PUT:5", "range/stale:1"])
def test_a_mix_item_that_is_not_name_weight_is_named(item):
    error = one_line_error(SettingsError, parse_mix, f"put:45,{item}")
    assert error == (
        f"--etcd-mix: {item!r} is not NAME:WEIGHT with a weight of zero or more and a name among "
        "put, range, range/linearizable, range/serializable, delete, txn-put"
    )


@pytest.mark.parametrize("text", ["", " , ", "put:0", "put:0,range:0"])
def test_a_mix_needs_a_positive_weight(text):
    error = one_line_error(SettingsError, parse_mix, text)
    assert error == "--etcd-mix: give at least one operation with a positive weight, e.g. put:45,range:30"


# -- --etcd-metrics-urls and --etcd-metrics-interval --


def test_new_options_have_defaults_and_env_vars():
    flags = {option.flag: option for option in OPTIONS}
    assert flags["--etcd-metrics-interval"].default == 5.0
    assert flags["--etcd-metrics-interval"].env_var == "ETCD_METRICS_INTERVAL"
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
