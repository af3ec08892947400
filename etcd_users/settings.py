"""The ``--etcd-*`` options and every parser that turns them into one frozen ``EtcdSettings``.

Names mirror etcd's own ``benchmark`` tool (``--endpoints --conns --key-size --val-size --key-space-size
--sequential-keys --consistency``) under ``--etcd-``. Every option has an environment variable and a typed
default: Locust's web UI casts the form's strings to the default's type.

Pure: this module imports nothing of Locust, gRPC or the run, so the suite runner, the tests and the analysis can
validate options without gevent's monkey patching. ``etcd_users.plugin`` registers the options with Locust.
"""

import argparse
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from etcd_users.arguments import Option
from etcd_users.files import AGGREGATED

DEFAULT_PREFIX = "/locust-etcd/"
TARGETS = ("round-robin", "leader")
CONSISTENCIES = ("l", "s")


class SettingsError(ValueError):
    """Bad input, told in one line that names the option and the fix."""


OPTIONS = (
    Option(
        "--etcd-endpoints",
        "",
        "Comma-separated client URLs (http://HOST:PORT or https://HOST:PORT). Empty: start a throwaway local etcd.",
    ),
    Option(
        "--etcd-target",
        "round-robin",
        "Where requests go: 'leader' (every request to the current leader, like benchmark --target-leader) or "
        "'round-robin' (successive requests rotate over every endpoint).",
        choices=TARGETS,
    ),
    Option(
        "--etcd-sla",
        "",
        "Gates checked when the run ends, as [NAME:]METRIC<VALUE,… e.g. put:p99<15ms,range/serializable:p99.9<10ms,"
        "errors<0.1%,qps>1000 (no NAME: all requests); each is printed with PASS or FAIL, and a failed gate "
        "makes the exit code 3.",
    ),
    Option(
        "--etcd-local-members",
        1,
        "Members of the local etcd started when no endpoints are given: 1 or 3.",
        choices=(1, 3),
    ),
    Option("--etcd-conns", 1, "gRPC connections per endpoint per process, shared by all users of the process."),
    Option("--etcd-key-size", 256, "Key size in bytes, prefix included."),
    Option("--etcd-val-size", 1024, "Value size in bytes."),
    Option(
        "--etcd-max-request-bytes",
        1572864,
        "The largest request etcd takes, as its --max-request-bytes (1.5 MiB by default): key and value sizes and "
        "transactions are checked against it at start. Raise it only with the servers' own limit.",
    ),
    Option("--etcd-key-space-size", 10000, "Number of distinct keys written and read."),
    Option("--etcd-sequential-keys", False, "Walk the key space in order instead of picking keys at random."),
    Option("--etcd-prefix", DEFAULT_PREFIX, "Every key starts with this prefix; the tool never writes outside it."),
    Option(
        "--etcd-allow-existing",
        False,
        "Run even if keys already exist under the prefix (by default a non-empty prefix is refused, as etcdctl check "
        "perf does).",
    ),
    Option("--etcd-cleanup", False, "Delete every key under the prefix (and only there) when the run ends."),
    Option(
        "--etcd-consistency",
        "l",
        "Consistency of EtcdRangeUser's reads: 'l' linearizable or 's' serializable.",
        choices=CONSISTENCIES,
    ),
    Option("--etcd-timeout", 5.0, "Seconds before a call, or the start-up check of the endpoints, gives up."),
    Option(
        "--etcd-user-rate",
        0.0,
        "Requests per second of each user on an intended schedule (0: closed loop, back to back). "
        "Late responses do not delay the schedule; latency from the intended send time is recorded too.",
    ),
    Option("--etcd-txn-ops", 1, "Operations in each transaction of the txn-put and txn-mixed workloads."),
    Option(
        "--etcd-rw-ratio",
        1.0,
        "Reads per write in the txn-mixed workload (1.0: as many read transactions as write transactions).",
    ),
    Option("--etcd-watch-streams", 1, "Watch streams opened by each EtcdWatchUser."),
    Option("--etcd-watchers-per-stream", 1, "Watchers on the user's key in each watch stream."),
    Option(
        "--etcd-mix",
        "put:45,range:30,delete:25",
        "Operation weights of EtcdMixedUser as NAME:WEIGHT,… with names put, range, range/linearizable, "
        "range/serializable, delete, txn-put.",
    ),
    Option("--etcd-cacert", "", "CA bundle (PEM) that signs the servers' certificates, for https:// endpoints."),
    Option("--etcd-cert", "", "Client certificate (PEM) for mutual TLS."),
    Option("--etcd-key", "", "Client private key (PEM) for mutual TLS.", secret=True),
    Option("--etcd-user", "", "etcd authentication as name:password.", secret=True),
    Option(
        "--etcd-metrics-urls",
        "",
        "Comma-separated Prometheus URLs of the members, one per endpoint in the same order (for etcd's "
        "--listen-metrics-urls). Empty: each client URL + /metrics.",
    ),
    Option(
        "--etcd-metrics-interval",
        5.0,
        "Seconds between polls of every member's /metrics during a run, written to PREFIX_etcd_metrics.csv with "
        "--csv PREFIX (0: off).",
    ),
    Option(
        "--etcd-skip-preflight",
        False,
        "Skip the start-up write burst (200 small puts under the prefix, deleted at once) that measures each "
        "member's WAL fsync P99; versions and db size against quota are still reported.",
    ),
    Option(
        "--etcd-compact-interval",
        0.0,
        "Seconds between compactions of etcd's history during the run, each at the revision of that many seconds ago "
        "(like benchmark put --compact-interval; 0: off). Compaction is cluster-wide: use it on a cluster whose "
        "history you may drop. The local etcd compacts itself.",
    ),
)


OPTIONS_TITLE = "etcd"
OPTIONS_DESCRIPTION = "etcd v3 gRPC load (each option also reads the environment variable shown)"


# -- endpoints --


@dataclass(frozen=True)
class Endpoint:
    url: str
    secure: bool

    @property
    def target(self) -> str:
        """host:port, what gRPC dials."""
        return urlsplit(self.url).netloc


def parse_endpoints(text: str) -> list[Endpoint]:
    endpoints = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        parts = urlsplit(item)
        try:
            port = parts.port
        except ValueError:
            port = None
        if parts.scheme not in ("http", "https") or not parts.hostname or port is None or parts.path not in ("", "/"):
            raise SettingsError(
                f"--etcd-endpoints: {item!r} is not a client URL; write http://HOST:PORT or https://HOST:PORT, "
                "comma-separated"
            )
        endpoints.append(Endpoint(url=f"{parts.scheme}://{parts.netloc}", secure=parts.scheme == "https"))
    if len({endpoint.url for endpoint in endpoints}) != len(endpoints):
        raise SettingsError("--etcd-endpoints: an endpoint is listed twice")
    return endpoints


# -- SLA gates (--etcd-sla), judged by etcd_users.reporting.sla --

LATENCY_UNITS = {"us": 1.0, "µs": 1.0, "ms": 1000.0, "s": 1_000_000.0}  # to microseconds
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_GATE = re.compile(
    r"""^\s*(?:(?P<name>.*\S)\s*:)?\s*
        (?P<metric>[A-Za-z][A-Za-z0-9.]*)\s*
        (?P<op><=|>=|<|>)\s*
        (?P<value>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*
        (?P<unit>[A-Za-zµ%/]+)?\s*$""",
    re.VERBOSE,
)
_GATE_EXAMPLE = "put:p99<15ms, p99.9<=10ms, errors<0.1% or qps>1000"


class SlaError(SettingsError):
    """A gate that cannot be read, told in one line."""


class Gate(NamedTuple):
    """One threshold. ``name`` None: all requests. ``percentile`` for pNN gates; ``threshold`` in ``unit``."""

    text: str
    name: str | None
    metric: str  # "percentile", "mean", "max", "errors", "qps"
    percentile: float | None
    op: str
    threshold: float
    unit: str  # a latency unit, "%" or "" (errors as a count, qps)

    @property
    def label(self) -> str:
        metric = f"p{self.percentile:g}" if self.metric == "percentile" else self.metric
        return f"{self.name or AGGREGATED} {metric}"

    @property
    def limit(self) -> str:
        return f"{self.op} {self.threshold:g}{self.unit}"


def _gate_error(gate: str, why: str) -> SlaError:
    return SlaError(f"--etcd-sla: {gate!r} {why}: expected NAME:METRIC<VALUE such as {_GATE_EXAMPLE}")


def _gate_percentile(gate: str, digits: str) -> float:
    # p999 and p9999 are the usual shorthand for 99.9 and 99.99
    if "." not in digits and len(digits) > 2 and digits.startswith("99"):
        digits = f"99.{digits[2:]}"
    try:
        value = float(digits)
    except ValueError:
        raise _gate_error(gate, "has an unknown metric") from None
    if not 0 < value <= 100:
        raise _gate_error(gate, f"asks for percentile {digits}, outside 0-100")
    return value


def parse_gate(text: str) -> Gate:
    """One gate such as ``put:p99<15ms``; SlaError names the gate and the expected form."""
    gate = text.strip()
    match = _GATE.match(gate)
    if match is None:
        raise _gate_error(gate, "is not a gate")
    name = match["name"]
    name = None if name is None or name.strip() in ("", "*") else name.strip()
    metric_text, op, unit = match["metric"].lower(), match["op"], (match["unit"] or "").lower()
    threshold = float(match["value"])
    if metric_text.startswith("p") and metric_text[1:2].isdigit():
        metric, percentile = "percentile", _gate_percentile(gate, metric_text[1:])
    elif metric_text in ("mean", "avg", "max"):
        metric, percentile = ("max" if metric_text == "max" else "mean"), None
    elif metric_text in ("errors", "qps"):
        metric, percentile = metric_text, None
    else:
        raise _gate_error(gate, f"has an unknown metric {match['metric']!r} (pNN, mean, max, errors or qps)")
    if metric in ("percentile", "mean", "max"):
        if unit not in LATENCY_UNITS:
            why = "has no unit" if not unit else f"has the unit {unit!r}"
            raise _gate_error(gate, f"{why} (latencies take us, ms or s)")
    elif metric == "errors":
        if unit not in ("", "%"):
            raise _gate_error(gate, f"has the unit {unit!r} (errors take % for a share, none for a count)")
        if unit == "%" and threshold > 100:
            raise _gate_error(gate, "asks for more than 100% of errors")
    elif unit not in ("", "/s"):
        raise _gate_error(gate, f"has the unit {unit!r} (qps takes none: requests per second)")
    else:
        unit = ""
    return Gate(gate, name, metric, percentile, op, threshold, unit)


def parse_gates(text: str) -> tuple[Gate, ...]:
    """``--etcd-sla``: comma-separated gates; empty text, no gates."""
    return tuple(parse_gate(part) for part in text.split(",") if part.strip())


# -- the settings --


@dataclass(frozen=True)
class Credentials:
    """TLS material read from files, and the auth user."""

    root_certificates: bytes | None = None
    certificate_chain: bytes | None = None
    private_key: bytes | None = None
    user: str = ""
    password: str = ""


@dataclass(frozen=True)
class EtcdSettings:
    endpoints: tuple[Endpoint, ...]
    local_members: int
    target: str
    conns: int
    key_size: int
    val_size: int
    key_space_size: int
    sequential_keys: bool
    prefix: bytes
    allow_existing: bool
    cleanup: bool
    consistency: str
    timeout: float
    user_rate: float
    txn_ops: int
    rw_ratio: float
    watch_streams: int
    watchers_per_stream: int
    mix: tuple[tuple[str, float], ...]
    credentials: Credentials
    # server metrics and the pre-flight report (etcd_users.reporting.server_metrics, .preflight)
    metrics_urls: tuple[str, ...] = ()  # aligned with endpoints; empty: each endpoint's URL + /metrics
    metrics_interval: float = 5.0
    skip_preflight: bool = False
    sla: tuple[Gate, ...] = ()  # checked when the run ends (etcd_users.reporting.sla)
    compact_interval: float = 0.0  # seconds; 0: the run compacts nothing
    max_request_bytes: int = 1572864  # etcd's --max-request-bytes

    @property
    def key_width(self) -> int:
        """Digits of the key counter: what the key size leaves after the prefix."""
        return self.key_size - len(self.prefix)


def _read_pem(flag: str, path: str) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as error:
        raise SettingsError(f"{flag}: cannot read {path!r} ({error.strerror}); give the path of a PEM file") from None


def _positive(flag: str, value, allow_zero: bool = False):
    if value < 0 or (value == 0 and not allow_zero):
        raise SettingsError(f"{flag}: {value!r} must be {'zero or more' if allow_zero else 'greater than zero'}")
    return value


MIX_OPERATIONS = ("put", "range", "range/linearizable", "range/serializable", "delete", "txn-put")


def parse_mix(text: str) -> tuple[tuple[str, float], ...]:
    """``put:45,range:30,delete:25`` into ((name, weight), …)."""
    mix = []
    for item in (part.strip() for part in text.split(",") if part.strip()):
        name, _, weight = item.partition(":")
        try:
            value = float(weight)
        except ValueError:
            value = -1.0
        if name not in MIX_OPERATIONS or value < 0:
            raise SettingsError(
                f"--etcd-mix: {item!r} is not NAME:WEIGHT with a weight of zero or more and a name among "
                f"{', '.join(MIX_OPERATIONS)}"
            )
        mix.append((name, value))
    if not mix or sum(weight for _, weight in mix) <= 0:
        raise SettingsError("--etcd-mix: give at least one operation with a positive weight, e.g. put:45,range:30")
    return tuple(mix)


def _txn_ops(value: int, key_space_size: int) -> int:
    _positive("--etcd-txn-ops", value)
    if value > key_space_size:
        raise SettingsError(
            f"--etcd-txn-ops: {value} puts need as many distinct keys, but --etcd-key-space-size is {key_space_size}"
        )
    return value


def settings_from_options(options: argparse.Namespace) -> EtcdSettings:
    """Validate the parsed ``--etcd-*`` options (also as the web UI sends them) into settings."""
    endpoints = parse_endpoints(options.etcd_endpoints)
    if options.etcd_local_members not in (1, 3):
        raise SettingsError(f"--etcd-local-members: {options.etcd_local_members!r} is not 1 or 3")
    if options.etcd_target not in TARGETS:
        raise SettingsError(f"--etcd-target: {options.etcd_target!r} is not one of: {', '.join(TARGETS)}")
    if options.etcd_consistency not in CONSISTENCIES:
        raise SettingsError(f"--etcd-consistency: {options.etcd_consistency!r} is not 'l' or 's'")
    prefix = options.etcd_prefix.encode()
    if prefix.strip(b"/") == b"":
        raise SettingsError(
            f"--etcd-prefix: {options.etcd_prefix!r} would cover the whole key space; give a prefix such as "
            f"{DEFAULT_PREFIX!r}"
        )
    key_space_size = _positive("--etcd-key-space-size", options.etcd_key_space_size)
    counter_digits = len(str(key_space_size - 1))
    if options.etcd_key_size < len(prefix) + counter_digits:
        raise SettingsError(
            f"--etcd-key-size: {options.etcd_key_size} is too small for the prefix {options.etcd_prefix!r} "
            f"({len(prefix)} bytes) plus a {counter_digits}-digit key counter; use at least "
            f"{len(prefix) + counter_digits} or a shorter --etcd-prefix"
        )
    user, _, password = options.etcd_user.partition(":")
    if options.etcd_user and not (user and password):
        raise SettingsError("--etcd-user: expected NAME:PASSWORD")
    if bool(options.etcd_cert) != bool(options.etcd_key):
        raise SettingsError("--etcd-cert and --etcd-key: mutual TLS needs both the certificate and its key")
    credentials = Credentials(
        root_certificates=_read_pem("--etcd-cacert", options.etcd_cacert),
        certificate_chain=_read_pem("--etcd-cert", options.etcd_cert),
        private_key=_read_pem("--etcd-key", options.etcd_key),
        user=user,
        password=password,
    )
    return EtcdSettings(
        endpoints=tuple(endpoints),
        local_members=options.etcd_local_members,
        target=options.etcd_target,
        conns=_positive("--etcd-conns", options.etcd_conns),
        key_size=options.etcd_key_size,
        val_size=_positive("--etcd-val-size", options.etcd_val_size, allow_zero=True),
        key_space_size=key_space_size,
        sequential_keys=bool(options.etcd_sequential_keys),
        prefix=prefix,
        allow_existing=bool(options.etcd_allow_existing),
        cleanup=bool(options.etcd_cleanup),
        consistency=options.etcd_consistency,
        timeout=_positive("--etcd-timeout", options.etcd_timeout),
        user_rate=_positive("--etcd-user-rate", options.etcd_user_rate, allow_zero=True),
        txn_ops=_txn_ops(options.etcd_txn_ops, key_space_size),
        rw_ratio=_positive("--etcd-rw-ratio", options.etcd_rw_ratio, allow_zero=True),
        watch_streams=_positive("--etcd-watch-streams", options.etcd_watch_streams),
        watchers_per_stream=_positive("--etcd-watchers-per-stream", options.etcd_watchers_per_stream),
        mix=parse_mix(options.etcd_mix),
        credentials=credentials,
        metrics_urls=_metrics_urls(options.etcd_metrics_urls, endpoints),
        metrics_interval=_positive("--etcd-metrics-interval", options.etcd_metrics_interval, allow_zero=True),
        skip_preflight=bool(options.etcd_skip_preflight),
        sla=parse_gates(getattr(options, "etcd_sla", "")),
        compact_interval=_positive("--etcd-compact-interval", options.etcd_compact_interval, allow_zero=True),
        max_request_bytes=_positive("--etcd-max-request-bytes", options.etcd_max_request_bytes),
    )


def _metrics_urls(text: str, endpoints: list[Endpoint]) -> tuple[str, ...]:
    urls = tuple(part.strip() for part in text.split(",") if part.strip())
    if not urls:
        return ()
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SettingsError(f"--etcd-metrics-urls: {url!r} is not a URL; write http://HOST:PORT/metrics")
    if endpoints and len(urls) != len(endpoints):
        raise SettingsError(
            f"--etcd-metrics-urls: {len(urls)} URLs for {len(endpoints)} --etcd-endpoints; give one per endpoint, "
            "in the same order, or none to use each client URL + /metrics"
        )
    return urls
