"""The ``--etcd-*`` options and every parser that turns them into one frozen ``EtcdSettings``.

Names mirror etcd's own ``benchmark`` tool (``--endpoints --conns --key-size --val-size --key-space-size
--sequential-keys --consistency``) under ``--etcd-``. Every option has an environment variable and a typed
default: Locust's web UI casts the form's strings to the default's type.

Pure: this module imports nothing of Locust, gRPC or the run, so the suite runner, the tests and the analysis can
validate options without gevent's monkey patching. ``etcd_users.plugin`` registers the options with Locust.
"""

import argparse
import math
import operator
import re
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from etcd_users.arguments import SHOWN_PATH_CHARACTERS, Option, shown
from etcd_users.files import AGGREGATED

DEFAULT_PREFIX = "/locust-etcd/"
TARGETS = ("round-robin", "leader")
CONSISTENCIES = ("l", "s")
# etcd refuses a request whose raft entry (the request, a header with its ID and user name) exceeds its
# --max-request-bytes: a put of key + value fits with this much to spare, and each further put of a txn adds this
REQUEST_OVERHEAD_BYTES = 512
TXN_OP_OVERHEAD_BYTES = 16
# what the tool's gRPC channels send at most (grpc.max_send_message_length in transport/pool.py)
CLIENT_MAX_SEND_BYTES = 16 * 1024 * 1024
# a PEM file is small (a CA bundle of every public root is about 200 KiB); never read /dev/zero to its end
PEM_MAX_BYTES = 4 * 1024 * 1024


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
        "--etcd-junit",
        "",
        "Write the SLA gates (and a shape's per-level verdicts) as a JUnit XML report to this file when the run ends, "
        "for CI test reports; the file is written whether gates fail or not. Empty: none.",
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
    Option(
        "--etcd-prefix",
        DEFAULT_PREFIX,
        "Every key starts with this prefix, a directory that ends in '/'; the tool never writes outside it.",
    ),
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
        "Seconds between polls of every member's /metrics during a run (0: off): they watch each db against its "
        "quota and etcd's alarms, and go to PREFIX_etcd_metrics.csv with --csv PREFIX.",
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
        "(like benchmark put --compact-interval; 0: off), by the master only. Compaction is cluster-wide: use it on a "
        "cluster whose history you may drop. The local etcd compacts itself every 5 s.",
    ),
    Option(
        "--etcd-profile-on-breach",
        0.0,
        "When a gate first fails during a run, take a CPU profile of that many seconds (0: off; at most 300), the "
        "goroutines, the heap and /metrics of every member into PREFIX_breach/ (with --csv PREFIX only), in the "
        "background. The members need etcd's --enable-pprof.",
    ),
    Option(
        "--etcd-local-pprof",
        False,
        "Start the local etcd's members with --enable-pprof (for --etcd-profile-on-breach).",
    ),
    Option(
        "--etcd-prometheus-port",
        0,
        "Serve the run's live metrics for Prometheus at http://HOST:PORT/metrics from the master or the single "
        "process (0: off; HOST is --web-host), and at /etcd/metrics of the web UI (see Prometheus and Grafana).",
    ),
    Option(
        "--etcd-prometheus-window",
        10,
        "Seconds of the latest merged latencies behind the exporter's exact quantiles and its SLA gates (1 to 3600).",
    ),
)


# Kubernetes-shaped traffic (EtcdKubernetesUser, EtcdKubernetesNodeUser; etcd_users/kubernetes/): --etcd-k8s-*
OPTIONS += (
    Option(
        "--etcd-k8s-objects",
        "pods:5000,configmaps:1000,leases:200",
        "Objects of the Kubernetes workload as RESOURCE:COUNT,…, written before the run (only the missing ones) "
        "under PREFIX/RESOURCE/NAMESPACE/NAME.",
    ),
    Option("--etcd-k8s-namespaces", 10, "Namespaces the objects of each resource are spread over."),
    Option(
        "--etcd-k8s-object-size",
        "2048:8192",
        "Bytes of each object written: MIN:MAX drawn uniformly, or one size such as 4096.",
    ),
    Option("--etcd-k8s-page-size", 500, "Objects per page of a list (kube-apiserver's limit=500)."),
    Option(
        "--etcd-k8s-read-mix",
        "get:5,get-stale:2,get-at-rev:8,list-stale:5,list-and-watch:80",
        "Read weights of EtcdKubernetesUser as NAME:WEIGHT,… with names get, get-stale, get-at-rev, list-stale, "
        "list-and-watch, count (default: etcd's robustness Kubernetes traffic).",
    ),
    Option(
        "--etcd-k8s-write-mix",
        "update:90,delete:5,create:5",
        "Write weights of EtcdKubernetesUser as NAME:WEIGHT,… with names update, delete, create.",
    ),
    Option("--etcd-k8s-rw-ratio", 1.0, "Reads per write of EtcdKubernetesUser (0: writes only)."),
    Option("--etcd-k8s-nodes", 100, "Nodes whose lease EtcdKubernetesNodeUser renews (in namespace kube-node-lease)."),
    Option("--etcd-k8s-lease-period", 10.0, "Seconds between two renewals of a node's lease (the kubelet's 10 s)."),
    Option(
        "--etcd-k8s-compact-interval",
        300.0,
        "Seconds between compactions by the master during a Kubernetes run, as kube-apiserver compacts every 5 min "
        "(0: off). Compaction is cluster-wide: it runs on the local etcd, or on the endpoints given only with "
        "--etcd-k8s-compact-allowed.",
    ),
    Option(
        "--etcd-k8s-compact-allowed",
        False,
        "Let --etcd-k8s-compact-interval compact the cluster of --etcd-endpoints (its whole history, every key).",
    ),
    Option(
        "--etcd-k8s-prefill-seconds",
        600.0,
        "At most this long writing the missing objects before a Kubernetes run (not measured); the run then "
        "goes on with what exists.",
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


def _list_items(flag: str, text: str, what: str, empty_means: str) -> list[str]:
    """The comma-separated entries of a list option; empty text, none. An empty entry is refused: ``,`` must not
    quietly mean "none" (for --etcd-endpoints, a local etcd instead of the cluster meant)."""
    if not text.strip():
        return []
    items = [part.strip() for part in text.split(",")]
    if not all(items):
        raise SettingsError(
            f"{flag}: {shown(text)} has an empty entry; give {what} separated by single commas, or nothing at all "
            f"for {empty_means}"
        )
    return items


def _url_parts(item: str):
    """``urlsplit(item)`` and its port, or None for a URL that does not parse (``http://[::1``, a port of 99999)."""
    try:
        parts = urlsplit(item)
        return parts, parts.port
    except ValueError:
        return None, None


def parse_endpoints(text: str) -> list[Endpoint]:
    endpoints = []
    for item in _list_items("--etcd-endpoints", text, "client URLs", "a throwaway local etcd"):
        parts, port = _url_parts(item)
        if (
            parts is None
            or parts.scheme not in ("http", "https")
            or not parts.hostname
            or len(parts.hostname) > 253  # what DNS allows: a longer "host" is a paste gone wrong
            or not port
            or parts.path not in ("", "/")
            or parts.username is not None
            or parts.query
            or parts.fragment
        ):
            raise SettingsError(
                f"--etcd-endpoints: {shown(item)} is not a client URL; write http://HOST:PORT or https://HOST:PORT "
                "(IPv6: http://[::1]:2379), comma-separated"
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
    return SlaError(f"--etcd-sla: {shown(gate)} {why}: expected NAME:METRIC<VALUE such as {_GATE_EXAMPLE}")


def _gate_percentile(gate: str, digits: str) -> float:
    # p999 and p9999 are the usual shorthand for 99.9 and 99.99
    if "." not in digits and len(digits) > 2 and digits.startswith("99"):
        digits = f"99.{digits[2:]}"
    try:
        value = float(digits)
    except ValueError:
        raise _gate_error(gate, "has an unknown metric") from None
    if not 0 < value <= 100:
        raise _gate_error(gate, f"asks for percentile {digits if len(digits) < 20 else shown(digits)}, outside 0-100")
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
    if not math.isfinite(threshold):  # 400 digits make inf, which every comparison gets wrong
        raise _gate_error(gate, f"has a threshold of {len(match['value'])} digits, beyond any number")
    if metric_text.startswith("p") and metric_text[1:2].isdigit():
        metric, percentile = "percentile", _gate_percentile(gate, metric_text[1:])
    elif metric_text in ("mean", "avg", "max"):
        metric, percentile = ("max" if metric_text == "max" else "mean"), None
    elif metric_text in ("errors", "qps"):
        metric, percentile = metric_text, None
    else:
        raise _gate_error(gate, f"has an unknown metric {shown(match['metric'])} (pNN, mean, max, errors or qps)")
    if metric in ("percentile", "mean", "max"):
        if unit not in LATENCY_UNITS:
            why = "has no unit" if not unit else f"has the unit {shown(unit)}"
            raise _gate_error(gate, f"{why} (latencies take us, ms or s)")
    elif metric == "errors":
        if unit not in ("", "%"):
            raise _gate_error(gate, f"has the unit {shown(unit)} (errors take % for a share, none for a count)")
        if unit == "%" and threshold > 100:
            raise _gate_error(gate, "asks for more than 100% of errors")
    elif unit not in ("", "/s"):
        raise _gate_error(gate, f"has the unit {shown(unit)} (qps takes none: requests per second)")
    else:
        unit = ""
    return Gate(gate, name, metric, percentile, op, threshold, unit)


def parse_gates(text: str) -> tuple[Gate, ...]:
    """``--etcd-sla``: comma-separated gates; empty text, no gates."""
    return tuple(parse_gate(part) for part in text.split(",") if part.strip())


# -- Kubernetes-shaped traffic (--etcd-k8s-*), read by etcd_users.kubernetes --

K8S_READS = ("get", "get-stale", "get-at-rev", "list-stale", "list-and-watch", "count")
K8S_WRITES = ("update", "delete", "create")
K8S_MAX_OBJECTS = 10_000_000  # per resource: the process keeps every object's revision in memory
K8S_MAX_NAMESPACES = 10_000  # ns-0000 … ns-9999
K8S_MAX_NODES = 1_000_000
# a Kubernetes resource is a lower-case DNS label (pods, configmaps, leases, …): the second segment of its keys
_K8S_RESOURCE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class KubeSettings:
    """The ``--etcd-k8s-*`` options; the defaults are those of the options (a unit test holds them equal)."""

    objects: tuple[tuple[str, int], ...] = (("pods", 5000), ("configmaps", 1000), ("leases", 200))
    namespaces: int = 10
    object_size: tuple[int, int] = (2048, 8192)  # uniform between the two, both included
    page_size: int = 500
    read_mix: tuple[tuple[str, float], ...] = (
        ("get", 5.0),
        ("get-stale", 2.0),
        ("get-at-rev", 8.0),
        ("list-stale", 5.0),
        ("list-and-watch", 80.0),
    )
    write_mix: tuple[tuple[str, float], ...] = (("update", 90.0), ("delete", 5.0), ("create", 5.0))
    rw_ratio: float = 1.0  # reads per write
    nodes: int = 100
    lease_period: float = 10.0
    compact_interval: float = 300.0
    compact_allowed: bool = False
    prefill_seconds: float = 600.0


def parse_k8s_objects(text: str) -> tuple[tuple[str, int], ...]:
    """``pods:5000,configmaps:1000`` into (("pods", 5000), ("configmaps", 1000))."""
    objects: list[tuple[str, int]] = []
    for item in _list_items("--etcd-k8s-objects", text, "RESOURCE:COUNT entries", "no objects, which no run can use"):
        resource, _, count = item.partition(":")
        resource = resource.strip()
        if not _K8S_RESOURCE.match(resource) or not count.strip().isdigit():
            raise SettingsError(
                f"--etcd-k8s-objects: {shown(item)} is not RESOURCE:COUNT with a lower-case resource name and a whole "
                "count; give e.g. pods:5000,configmaps:1000"
            )
        number = int(count)
        if not 1 <= number <= K8S_MAX_OBJECTS:
            raise SettingsError(
                f"--etcd-k8s-objects: {shown(item)} asks for {number} objects; give between 1 and {K8S_MAX_OBJECTS}"
            )
        if resource in (name for name, _ in objects):
            raise SettingsError(f"--etcd-k8s-objects: {resource!r} is listed twice; give each resource once")
        objects.append((resource, number))
    if not objects:
        raise SettingsError("--etcd-k8s-objects: give at least one RESOURCE:COUNT, e.g. pods:5000")
    return tuple(objects)


def parse_k8s_object_size(text: str) -> tuple[int, int]:
    """``2048:8192`` (uniform) or ``4096`` (fixed) into (smallest, largest)."""
    low, colon, high = text.strip().partition(":")
    if not colon:
        high = low
    if not (low.strip().isdigit() and high.strip().isdigit()) or int(low) > int(high):
        raise SettingsError(
            f"--etcd-k8s-object-size: {shown(text)} is not MIN:MAX with whole numbers, MIN at most MAX, nor one size; "
            "give e.g. 2048:8192 or 4096"
        )
    return int(low), int(high)


def parse_weights(flag: str, text: str, names: tuple[str, ...], example: str) -> tuple[tuple[str, float], ...]:
    """``NAME:WEIGHT,…`` of known ``names`` into ((name, weight), …), at least one weight above zero."""
    weights: list[tuple[str, float]] = []
    for item in (part.strip() for part in text.split(",") if part.strip()):
        name, _, weight = item.partition(":")
        try:
            value = float(weight)
        except ValueError:
            value = -1.0
        if name.strip() not in names or not math.isfinite(value) or value < 0:
            raise SettingsError(
                f"{flag}: {shown(item)} is not NAME:WEIGHT with a finite weight of zero or more and a name among "
                f"{', '.join(names)}"
            )
        if name.strip() in (known for known, _ in weights):
            raise SettingsError(f"{flag}: {name.strip()!r} is listed twice; give each name once, e.g. {example}")
        weights.append((name.strip(), value))
    total = sum(weight for _, weight in weights)
    if not weights or not 0 < total < math.inf:
        raise SettingsError(f"{flag}: give at least one name with a positive weight, e.g. {example}")
    return tuple(weights)


def _k8s_count(flag: str, value: int, most: int) -> int:
    _positive(flag, value)
    if value > most:
        raise SettingsError(f"{flag}: {shown(value)} is more than {most}; give at most {most}")
    return value


def k8s_settings_from_options(options: argparse.Namespace, prefix: bytes, max_request_bytes: int) -> KubeSettings:
    """The ``--etcd-k8s-*`` options, checked; the largest object and its key fit in one etcd request."""

    def option(name: str):
        dest = f"etcd_k8s_{name}"
        # a namespace made before these options existed (a test's, a web UI form's) has the defaults
        return getattr(options, dest, next(o.default for o in OPTIONS if o.dest == dest))

    objects = parse_k8s_objects(option("objects"))
    smallest, largest = parse_k8s_object_size(option("object_size"))
    # the longest key: PREFIX RESOURCE/ns-NNNN/RESOURCE-NNNNNN (etcd_users.kubernetes.layout)
    longest_key = len(prefix) + max(2 * len(resource) + len(str(count)) + 16 for resource, count in objects)
    if largest + longest_key + REQUEST_OVERHEAD_BYTES > max_request_bytes:
        raise SettingsError(
            f"--etcd-k8s-object-size: objects of {largest} bytes are larger than etcd's --max-request-bytes "
            f"(--etcd-max-request-bytes {max_request_bytes} here); use at most "
            f"{max_request_bytes - longest_key - REQUEST_OVERHEAD_BYTES} {_RAISE_LIMIT}"
        )
    return KubeSettings(
        objects=objects,
        namespaces=_k8s_count("--etcd-k8s-namespaces", option("namespaces"), K8S_MAX_NAMESPACES),
        object_size=(smallest, largest),
        page_size=_positive("--etcd-k8s-page-size", option("page_size")),
        read_mix=parse_weights("--etcd-k8s-read-mix", option("read_mix"), K8S_READS, "get:5,list-and-watch:80"),
        write_mix=parse_weights("--etcd-k8s-write-mix", option("write_mix"), K8S_WRITES, "update:90,delete:5,create:5"),
        rw_ratio=_positive("--etcd-k8s-rw-ratio", option("rw_ratio"), allow_zero=True),
        nodes=_k8s_count("--etcd-k8s-nodes", option("nodes"), K8S_MAX_NODES),
        lease_period=_positive("--etcd-k8s-lease-period", option("lease_period")),
        compact_interval=_positive("--etcd-k8s-compact-interval", option("compact_interval"), allow_zero=True),
        compact_allowed=bool(option("compact_allowed")),
        prefill_seconds=_positive("--etcd-k8s-prefill-seconds", option("prefill_seconds")),
    )


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
    profile_on_breach: float = 0.0  # seconds of CPU profile at the first breach (etcd_users.reporting.breach); 0: off
    local_pprof: bool = False  # the local etcd's members start with --enable-pprof
    prometheus_port: int = 0  # the live exporter's port (etcd_users.reporting.exporter); 0: off
    prometheus_window: int = 10  # seconds behind the exporter's quantiles and gates
    max_request_bytes: int = 1572864  # etcd's --max-request-bytes
    junit: str = ""  # --etcd-junit: the JUnit report's path (etcd_users.reporting.junit); empty: none
    k8s: KubeSettings = KubeSettings()  # --etcd-k8s-*: the Kubernetes-shaped workloads (etcd_users.kubernetes)

    @property
    def key_width(self) -> int:
        """Digits of the key counter: what the key size leaves after the prefix."""
        return self.key_size - len(self.prefix)


def _text(option: Option, value: object) -> None:
    """A text option holds UTF-8 text: argparse turns bytes that are not into surrogate escapes, which no key,
    file name or message sent to the workers can carry."""
    if not isinstance(value, str):
        return
    try:
        value.encode()
    except UnicodeEncodeError:
        quoted = "" if option.secret else f" {shown(value)}"
        raise SettingsError(
            f"{option.flag}:{quoted} is not UTF-8 text (the shell passed bytes that are not); give it in UTF-8"
        ) from None


def parse_prefix(text: str, flag: str = "--etcd-prefix") -> bytes:
    """A key prefix that is a directory: UTF-8 text that ends in '/' and is more than slashes.

    etcd's prefix range of ``/locust-etcd`` is every key that starts with those characters, ``/locust-etcd-sentinel``
    and ``/locust-etcd0`` of another application too; the check of the prefix, the clean-up and a role's permission
    all cover that range. Ending in '/' confines them to the tool's own keys.
    """
    try:
        prefix = text.encode()
    except UnicodeEncodeError:
        raise SettingsError(
            f"{flag}: {shown(text)} is not UTF-8 text (the shell passed bytes that are not); give a prefix such as "
            f"{DEFAULT_PREFIX!r}"
        ) from None
    if prefix.strip(b"/") == b"":
        raise SettingsError(
            f"{flag}: {shown(text)} would cover the whole key space; give a prefix such as {DEFAULT_PREFIX!r}"
        )
    if not prefix.endswith(b"/"):
        raise SettingsError(
            f"{flag}: {shown(text)} does not end in '/', and etcd's prefix range of {shown(text)} also covers "
            f"other applications' keys such as {shown(text + '-sentinel')}; give {shown(text + '/')}"
        )
    return prefix


def _finite(flag: str, value):
    """nan and inf are floats that pass every comparison a bound makes (nan < 0 and nan > 0 are both false)."""
    if isinstance(value, float) and not math.isfinite(value):
        default = next((option.default for option in OPTIONS if option.flag == flag), 1.0)
        raise SettingsError(f"{flag}: {value!r} is not a finite number; give one such as {default!r}")
    return value


def _positive(flag: str, value, allow_zero: bool = False):
    _finite(flag, value)
    if value < 0 or (value == 0 and not allow_zero):
        raise SettingsError(f"{flag}: {shown(value)} must be {'zero or more' if allow_zero else 'greater than zero'}")
    return value


PROFILE_ON_BREACH_MAX = 300.0  # seconds: a CPU profile longer than a few minutes no longer shows the breach


def _profile_on_breach(value: float) -> float:
    _positive("--etcd-profile-on-breach", value, allow_zero=True)
    if value > PROFILE_ON_BREACH_MAX:
        raise SettingsError(
            f"--etcd-profile-on-breach: {shown(value)} seconds is too long a profile; give at most "
            f"{PROFILE_ON_BREACH_MAX:g} (e.g. 10), or 0 for none"
        )
    return value


PROMETHEUS_WINDOW_MAX = 3600  # seconds: the exporter keeps each second of the window in memory


def _prometheus_port(value: int) -> int:
    if not 0 <= value <= 65535:
        raise SettingsError(
            f"--etcd-prometheus-port: {shown(value)} is not a TCP port; give one from 1 to 65535 (e.g. 9647), or 0 for "
            "no exporter"
        )
    return value


def _prometheus_window(value: int) -> int:
    if not 1 <= value <= PROMETHEUS_WINDOW_MAX:
        raise SettingsError(
            f"--etcd-prometheus-window: {shown(value)} seconds is outside 1 to {PROMETHEUS_WINDOW_MAX}; give e.g. 10"
        )
    return value


NAME_MAX_BYTES = 255  # the longest file name Linux file systems take


def parse_junit_path(path: str) -> str:
    """A file path for the JUnit report; whether its directory is writable is checked on the master at start-up
    (``reporting.junit.check_path``), not here: a worker's file system is not the master's."""
    if not path:
        return path
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if path.endswith("/") or name in ("", ".", ".."):
        raise SettingsError(
            f"--etcd-junit: {shown(path, SHOWN_PATH_CHARACTERS)} names a directory; give a file path such as "
            "reports/junit.xml"
        )
    if any(len(part.encode(errors="surrogateescape")) > NAME_MAX_BYTES for part in path.split("/")):
        raise SettingsError(
            f"--etcd-junit: {shown(path, SHOWN_PATH_CHARACTERS)} has a name longer than {NAME_MAX_BYTES} bytes, which "
            "no file system takes; give a file path such as reports/junit.xml"
        )
    return path


def _user_rate(value: float) -> float:
    _positive("--etcd-user-rate", value, allow_zero=True)
    if value > 0 and not math.isfinite(1.0 / value):
        raise SettingsError(f"--etcd-user-rate: {value!r} puts a request due only after forever; give e.g. 10.0")
    return value


def _max_request_bytes(value: int) -> int:
    _positive("--etcd-max-request-bytes", value)
    if value > CLIENT_MAX_SEND_BYTES:
        raise SettingsError(
            f"--etcd-max-request-bytes: {shown(value)} is more than the {CLIENT_MAX_SEND_BYTES} bytes (16 MiB) this "
            "tool's gRPC channels send; give etcd's --max-request-bytes (1572864, 1.5 MiB, by default)"
        )
    return value


_RAISE_LIMIT = "or raise etcd's --max-request-bytes on every member and --etcd-max-request-bytes here to match"


def _request_sizes(key_size: int, val_size: int, txn_ops: int, max_bytes: int, user: str) -> None:
    """A put (key + value), a transaction of --etcd-txn-ops puts and the key alone fit in one etcd request."""
    overhead = REQUEST_OVERHEAD_BYTES + len(user.encode())  # the request's header carries the user name
    limit = f"etcd's --max-request-bytes, 1.5 MiB by default (--etcd-max-request-bytes {max_bytes} here)"
    if key_size + overhead > max_bytes:
        raise SettingsError(
            f"--etcd-key-size: {shown(key_size)} makes every request larger than {limit}; use at most "
            f"{max_bytes - overhead} {_RAISE_LIMIT}"
        )
    if key_size + val_size + overhead > max_bytes:
        raise SettingsError(
            f"--etcd-val-size: a put of a {key_size}-byte key and a {shown(val_size)}-byte value is larger than "
            f"{limit}; use at most {max_bytes - overhead - key_size} {_RAISE_LIMIT}"
        )
    per_put = key_size + val_size + TXN_OP_OVERHEAD_BYTES
    if overhead - TXN_OP_OVERHEAD_BYTES + txn_ops * per_put > max_bytes:
        most = (max_bytes - overhead + TXN_OP_OVERHEAD_BYTES) // per_put
        raise SettingsError(
            f"--etcd-txn-ops: a transaction of {txn_ops} puts of {key_size}+{val_size} bytes is larger than "
            f"{limit}; use at most {most} puts or a smaller --etcd-val-size, {_RAISE_LIMIT}"
        )


# -- TLS files --

_PEM_KINDS = {
    "--etcd-cacert": ("the CA certificate", "openssl x509 -inform DER -in CA -out ca.pem"),
    "--etcd-cert": ("the client certificate", "openssl x509 -inform DER -in CERT -out cert.pem"),
    "--etcd-key": ("the client's private key", "openssl pkey -inform DER -in KEY -out key.pem"),
}


def _path(path: str) -> str:
    return shown(path, SHOWN_PATH_CHARACTERS)


def _read_pem(flag: str, path: str) -> bytes | None:
    """The file's bytes, once they look like PEM (gRPC's own complaint is pages of C-core log and a wrong cause)."""
    if not path:
        return None
    try:
        with open(Path(path).expanduser(), "rb") as pem:
            data = pem.read(PEM_MAX_BYTES + 1)
    except OSError as error:
        raise SettingsError(
            f"{flag}: cannot read {_path(path)} ({error.strerror}); give the path of a PEM file"
        ) from None
    what, convert = _PEM_KINDS[flag]
    if len(data) > PEM_MAX_BYTES:
        raise SettingsError(f"{flag}: {_path(path)} is larger than {PEM_MAX_BYTES} bytes; give {what} as a PEM file")
    if b"-----BEGIN " not in data:
        raise SettingsError(
            f"{flag}: {_path(path)} is not PEM (no '-----BEGIN ' line); give {what} in PEM, converted from DER "
            f"with: {convert}"
        )
    return data


class _EncryptedKey(Exception):
    pass


def _no_passphrase() -> bytes:
    raise _EncryptedKey


def _ssl_reason(error: ssl.SSLError) -> str:
    return error.reason or error.strerror or str(error)


def _check_tls_files(cacert: str, cert: str, key: str) -> None:
    """The CA holds certificates, and the client's key belongs to its certificate, as OpenSSL reads them."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if cacert:
        try:
            context.load_verify_locations(cafile=str(Path(cacert).expanduser()))
        except ssl.SSLError as error:
            raise SettingsError(
                f"--etcd-cacert: {_path(cacert)} holds no certificate OpenSSL can read ({_ssl_reason(error)}); give "
                "the PEM certificate of the CA that signs the servers' certificates"
            ) from None
    if cert and key:
        try:
            context.load_cert_chain(str(Path(cert).expanduser()), str(Path(key).expanduser()), password=_no_passphrase)
        except _EncryptedKey:
            raise SettingsError(
                f"--etcd-key: {_path(key)} is encrypted and gRPC takes no passphrase; decrypt it with: "
                "openssl pkey -in KEY -out key.pem"
            ) from None
        except ssl.SSLError as error:
            reason = _ssl_reason(error)
            if reason == "KEY_VALUES_MISMATCH":
                raise SettingsError(
                    f"--etcd-cert and --etcd-key: {_path(key)} is not the key of the certificate {_path(cert)} "
                    f"({reason}); give the key that belongs to it"
                ) from None
            raise SettingsError(
                f"--etcd-cert and --etcd-key: the certificate {_path(cert)} and the key {_path(key)} cannot be "
                f"loaded together ({reason}); give a PEM certificate and its unencrypted PEM key"
            ) from None


def _credentials(options: argparse.Namespace, endpoints: list[Endpoint], user: str, password: str) -> Credentials:
    files = {
        flag: path
        for flag, path in (
            ("--etcd-cacert", options.etcd_cacert),
            ("--etcd-cert", options.etcd_cert),
            ("--etcd-key", options.etcd_key),
        )
        if path
    }
    if bool(options.etcd_cert) != bool(options.etcd_key):
        raise SettingsError("--etcd-cert and --etcd-key: mutual TLS needs both the certificate and its key")
    if files and not any(endpoint.secure for endpoint in endpoints):
        where = (
            "--etcd-endpoints lists only http:// ones"
            if endpoints
            else "without --etcd-endpoints the tool starts a local etcd, which is plain http"
        )
        raise SettingsError(
            f"{' and '.join(files)}: TLS files are for https:// endpoints, and {where}; give https://HOST:PORT "
            f"endpoints or leave {'them' if len(files) > 1 else 'it'} out"
        )
    credentials = Credentials(
        root_certificates=_read_pem("--etcd-cacert", options.etcd_cacert),
        certificate_chain=_read_pem("--etcd-cert", options.etcd_cert),
        private_key=_read_pem("--etcd-key", options.etcd_key),
        user=user,
        password=password,
    )
    _check_tls_files(options.etcd_cacert, options.etcd_cert, options.etcd_key)
    return credentials


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
        if name not in MIX_OPERATIONS or not math.isfinite(value) or value < 0:
            raise SettingsError(
                f"--etcd-mix: {shown(item)} is not NAME:WEIGHT with a finite weight of zero or more and a name among "
                f"{', '.join(MIX_OPERATIONS)}"
            )
        mix.append((name, value))
    total = sum(weight for _, weight in mix)
    if not mix or total <= 0:
        raise SettingsError("--etcd-mix: give at least one operation with a positive weight, e.g. put:45,range:30")
    if not math.isfinite(total):
        raise SettingsError("--etcd-mix: the weights add up to more than a number holds; give e.g. put:45,range:30")
    return tuple(mix)


def _txn_ops(value: int, key_space_size: int) -> int:
    _positive("--etcd-txn-ops", value)
    if value > key_space_size:
        raise SettingsError(
            f"--etcd-txn-ops: {shown(value)} puts need as many distinct keys, but --etcd-key-space-size is "
            f"{key_space_size}"
        )
    return value


def settings_from_options(options: argparse.Namespace) -> EtcdSettings:
    """Validate the parsed ``--etcd-*`` options (also as the web UI sends them) into settings.

    Each value is checked for what it means, not only for its type: finite numbers, sizes that fit in one etcd
    request, lists without empty entries, URLs that parse, PEM files that OpenSSL loads, and a prefix that is a
    directory. Bad input is one line (``SettingsError``) that names the option, quotes long input shortened.
    """
    prefix = parse_prefix(options.etcd_prefix)
    for option in OPTIONS:
        _text(option, getattr(options, option.dest, option.default))
    endpoints = parse_endpoints(options.etcd_endpoints)
    if options.etcd_local_members not in (1, 3):
        raise SettingsError(f"--etcd-local-members: {shown(options.etcd_local_members)} is not 1 or 3")
    if options.etcd_target not in TARGETS:
        raise SettingsError(f"--etcd-target: {shown(options.etcd_target)} is not one of: {', '.join(TARGETS)}")
    if options.etcd_consistency not in CONSISTENCIES:
        raise SettingsError(f"--etcd-consistency: {shown(options.etcd_consistency)} is not 'l' or 's'")
    key_space_size = _positive("--etcd-key-space-size", options.etcd_key_space_size)
    counter_digits = len(str(key_space_size - 1))
    if options.etcd_key_size < len(prefix) + counter_digits:
        raise SettingsError(
            f"--etcd-key-size: {shown(options.etcd_key_size)} is too small for the prefix {shown(options.etcd_prefix)} "
            f"({len(prefix)} bytes) plus a {counter_digits}-digit key counter; use at least "
            f"{len(prefix) + counter_digits} or a shorter --etcd-prefix"
        )
    user, _, password = options.etcd_user.partition(":")
    if options.etcd_user and not (user and password):
        raise SettingsError("--etcd-user: expected NAME:PASSWORD")
    val_size = _positive("--etcd-val-size", options.etcd_val_size, allow_zero=True)
    txn_ops = _txn_ops(options.etcd_txn_ops, key_space_size)
    max_request_bytes = _max_request_bytes(options.etcd_max_request_bytes)
    _request_sizes(options.etcd_key_size, val_size, txn_ops, max_request_bytes, user)
    credentials = _credentials(options, endpoints, user, password)
    return EtcdSettings(
        endpoints=tuple(endpoints),
        local_members=options.etcd_local_members,
        target=options.etcd_target,
        conns=_positive("--etcd-conns", options.etcd_conns),
        key_size=options.etcd_key_size,
        val_size=val_size,
        key_space_size=key_space_size,
        sequential_keys=bool(options.etcd_sequential_keys),
        prefix=prefix,
        allow_existing=bool(options.etcd_allow_existing),
        cleanup=bool(options.etcd_cleanup),
        consistency=options.etcd_consistency,
        timeout=_positive("--etcd-timeout", options.etcd_timeout),
        user_rate=_user_rate(options.etcd_user_rate),
        txn_ops=txn_ops,
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
        max_request_bytes=max_request_bytes,
        junit=parse_junit_path(getattr(options, "etcd_junit", "")),
        k8s=k8s_settings_from_options(options, prefix, max_request_bytes),
        profile_on_breach=_profile_on_breach(getattr(options, "etcd_profile_on_breach", 0.0)),
        local_pprof=bool(getattr(options, "etcd_local_pprof", False)),
        prometheus_port=_prometheus_port(getattr(options, "etcd_prometheus_port", 0)),
        prometheus_window=_prometheus_window(getattr(options, "etcd_prometheus_window", 10)),
    )


def _metrics_urls(text: str, endpoints: list[Endpoint]) -> tuple[str, ...]:
    urls = tuple(_list_items("--etcd-metrics-urls", text, "URLs", "each client URL + /metrics"))
    if not urls:
        return ()
    for url in urls:
        parts, _ = _url_parts(url)
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise SettingsError(f"--etcd-metrics-urls: {shown(url)} is not a URL; write http://HOST:PORT/metrics")
    if endpoints and len(urls) != len(endpoints):
        raise SettingsError(
            f"--etcd-metrics-urls: {len(urls)} URLs for {len(endpoints)} --etcd-endpoints; give one per endpoint, "
            "in the same order, or none to use each client URL + /metrics"
        )
    return urls
