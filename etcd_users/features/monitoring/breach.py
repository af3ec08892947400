"""The server's side at the breach: when a gate first fails during a run, what each member was doing, on disk.

With ``--etcd-profile-on-breach SECONDS`` and ``--csv PREFIX``, the first failed gate of a run makes the master (or the
single process) fetch from every member at once, in greenlets over gevent's patched sockets: a CPU profile of the
next SECONDS (``/debug/pprof/profile``), every goroutine's stack (``/debug/pprof/goroutine?debug=2``), the heap
(``/debug/pprof/heap``) and a ``/metrics`` snapshot, into ``PREFIX_breach/<host_port>/``. ``PREFIX_breach/capture.json``
says why and when, and which files each member gave or why not. The users never wait for it: every fetch has a
deadline, so a member that is down or frozen costs its own files, never the run. pprof needs etcd's
``--enable-pprof``; a member without it answers 404 and gets one log line saying so.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import json
import logging
import os
import re
import ssl
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import gevent

from etcd_users.files import BREACH_CAPTURE, BREACH_FILES
from etcd_users.members.breach_files import capture_directory
from etcd_users.members.server_metrics import describe_error, member_urls, one_line, ssl_context
from etcd_users.settings import EtcdSettings

logger = logging.getLogger("etcd_users.monitoring.breach")  # the name users' log filters know

# a quick page (goroutines, heap, metrics) of a member that answers at all comes well within this
QUICK_TIMEOUT = 10.0
MAX_PAGE_BYTES = 256 * 1024 * 1024  # a goroutine dump of a busy member is a few MB; never hold more than this
_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def member_directory(endpoint_url: str) -> str:
    """``http://127.0.0.1:2379`` -> ``127.0.0.1_2379``: the member's host and port, safe as a file name anywhere."""
    parts = urllib.parse.urlsplit(endpoint_url)
    return _UNSAFE.sub("_", (parts.netloc or endpoint_url).replace("[", "").replace("]", "")).lstrip(".") or "member"


@dataclass(frozen=True)
class Member:
    name: str  # the endpoint's host:port, as the run shows it
    directory: str  # under PREFIX_breach/
    pprof_base: str  # the client URL: etcd serves /debug/pprof there with --enable-pprof
    metrics_url: str


def members_of(settings: EtcdSettings) -> list[Member]:
    """The run's endpoints and their /metrics URLs, each named by its host:port."""
    urls = member_urls(settings)
    netlocs = [urllib.parse.urlsplit(endpoint_url).netloc for endpoint_url, _ in urls]
    members = []
    for (endpoint_url, metrics_url), netloc in zip(urls, netlocs, strict=True):
        name, directory = netloc, member_directory(endpoint_url)
        if netlocs.count(netloc) > 1:  # http:// and https:// of one host:port: the scheme tells them apart
            name, directory = endpoint_url, _UNSAFE.sub("_", endpoint_url.replace("://", "_"))
        members.append(Member(name, directory, endpoint_url.rstrip("/"), metrics_url))
    return members


@dataclass
class Capture:
    """One capture: its greenlet, and what ``capture.json`` says so far."""

    directory: Path
    why: str
    seconds: float
    members: list[Member]
    timeout: float
    context: ssl.SSLContext | None = None
    started: float = field(default_factory=time.time)
    finished: float | None = None
    results: dict[str, dict] = field(default_factory=dict)
    greenlet: gevent.Greenlet | None = None

    @property
    def deadline(self) -> float:
        """Seconds the whole capture may take: the profile's own length, and the slowest answer's allowance."""
        return self.seconds + self.timeout + 5.0

    def start(self) -> "Capture":
        self.greenlet = gevent.spawn(self._run)
        return self

    def running(self) -> bool:
        return self.greenlet is not None and not self.greenlet.dead

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the capture (at most ``timeout`` seconds); True once it is done."""
        if self.greenlet is not None:
            self.greenlet.join(timeout=timeout)
        return not self.running()

    def _run(self) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._write_summary()  # a run killed mid-capture still says what was asked and when
            jobs = [gevent.spawn(self._member, member) for member in self.members]
            gevent.joinall(jobs, timeout=self.deadline)
            for job in jobs:
                job.kill(block=False)  # its files are bounded by their own deadlines; this is a last resort
            self.finished = time.time()
            self._write_summary()
            logger.info("breach capture: %s", self.summary_line())
        except Exception as error:  # a capture never stops a run
            logger.warning("breach capture: failed: %s", one_line(error))

    def _member(self, member: Member) -> None:
        result = self.results.setdefault(member.name, {"directory": member.directory, "files": {}, "errors": {}})
        base = member.pprof_base
        pages = {
            "profile": (f"{base}/debug/pprof/profile?seconds={self.seconds:g}", self.seconds + self.timeout),
            "goroutine": (f"{base}/debug/pprof/goroutine?debug=2", self.timeout),
            "heap": (f"{base}/debug/pprof/heap", self.timeout),
            "metrics": (member.metrics_url, self.timeout),
        }
        jobs = {kind: gevent.spawn(self._fetch, member, kind, url, timeout) for kind, (url, timeout) in pages.items()}
        gevent.joinall(list(jobs.values()))
        no_pprof = False
        for kind, job in jobs.items():
            outcome = job.value if job.successful() else f"failed: {job.exception!r}"
            if outcome is True:
                result["files"][kind] = f"{member.directory}/{BREACH_FILES[kind]}"
            else:
                result["errors"][kind] = outcome if isinstance(outcome, str) else "interrupted"
                no_pprof = no_pprof or (kind != "metrics" and result["errors"][kind].startswith("HTTP 404"))
        if no_pprof:
            logger.warning(
                "breach capture: %s has no /debug/pprof (HTTP 404): start etcd with --enable-pprof to get its profiles",
                member.name,
            )

    def _fetch(self, member: Member, kind: str, url: str, timeout: float) -> bool | str:
        """Save one page into the member's directory: True, or why not in one line."""
        path = self.directory / member.directory / BREACH_FILES[kind]
        try:
            with gevent.Timeout(timeout + 1.0):  # per socket read, urllib's timeout lets a trickle go on for ever
                body = self._get(url, timeout)
        except gevent.Timeout:
            return f"no complete answer within {timeout:g}s"
        except Exception as error:
            return describe_error(error, timeout)
        if not body:
            return "empty answer"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(path.name + ".part")
            temporary.write_bytes(body)
            os.replace(temporary, path)
        except OSError as error:
            return f"not written: {one_line(error)}"
        return True

    def _get(self, url: str, timeout: float) -> bytes:
        handlers: list = [urllib.request.HTTPSHandler(context=self.context)] if self.context is not None else []
        if urllib.parse.urlsplit(url).hostname in _LOOPBACK_HOSTS:
            handlers.insert(0, urllib.request.ProxyHandler({}))
        with urllib.request.build_opener(*handlers).open(url, timeout=timeout) as response:
            body = response.read(MAX_PAGE_BYTES + 1)
        if len(body) > MAX_PAGE_BYTES:
            raise ValueError(f"more than {MAX_PAGE_BYTES // (1024 * 1024)} MiB")
        return body

    def summary(self) -> dict:
        return {
            "why": self.why,
            "started": _iso(self.started),
            "started_unix": round(self.started, 3),
            "finished": _iso(self.finished) if self.finished is not None else None,
            "profile_seconds": self.seconds,
            "members": {
                member.name: self.results.get(member.name, {"directory": member.directory, "files": {}, "errors": {}})
                for member in self.members
            },
        }

    def summary_line(self) -> str:
        files = sum(len(result["files"]) for result in self.results.values())
        errors = sum(len(result["errors"]) for result in self.results.values())
        members = len(self.members)
        text = f"{files} file{'s' * (files != 1)} from {members} member{'s' * (members != 1)} in {self.directory}/"
        return text + (f" ({errors} not captured: see {BREACH_CAPTURE})" if errors else "")

    def _write_summary(self) -> None:
        path = self.directory / BREACH_CAPTURE
        temporary = path.with_name(path.name + ".part")
        temporary.write_text(json.dumps(self.summary(), indent=2) + "\n")
        os.replace(temporary, path)


def _iso(timestamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(timestamp)) + f".{int(timestamp % 1 * 1000):03d}Z"


def start_capture(prefix: str, settings: EtcdSettings, why: str, *, seconds: float | None = None) -> Capture | None:
    """Start capturing every member of ``settings`` into ``PREFIX_breach/`` in the background; None if it cannot.

    ``seconds`` (the CPU profile's length) defaults to ``settings.monitoring.profile_on_breach``.
    """
    seconds = settings.monitoring.profile_on_breach if seconds is None else seconds
    members = members_of(settings)
    if seconds <= 0 or not members:
        return None
    secure = any(url.startswith("https:") for member in members for url in (member.pprof_base, member.metrics_url))
    try:
        context = ssl_context(settings) if secure else None
    except (OSError, ssl.SSLError) as error:
        logger.error("locust-etcd: no breach capture: %s", one_line(error))
        return None
    timeout = min(settings.timeout, QUICK_TIMEOUT) if settings.timeout > 0 else QUICK_TIMEOUT
    capture = Capture(capture_directory(prefix), why, seconds, members, max(timeout, 1.0), context)
    logger.info(
        "breach capture: %s; profiling %d member%s for %gs into %s/",
        why,
        len(members),
        "s" * (len(members) != 1),
        seconds,
        capture.directory,
    )
    return capture.start()
