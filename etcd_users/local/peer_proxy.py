"""A TCP proxy in front of each local member's peer port: one-way delay with jitter, per member and per pair of
members too, blackholes, and one-way cuts.

The kernel here has no netem, so the network between members is made in user space, as etcd's own ``pkg/proxy`` does
for its functional and robustness tests. Each link listens on the port a member advertises to its peers and forwards
to the port the member really listens on; every chunk read is written on the other side at its arrival time plus the
delay (plus or minus the jitter), never before an earlier chunk of the same direction, so a connection's bytes keep
their order. Both directions of a connection go through the one proxy, so the round trip between two members is twice
the delay.

A member dials its peers itself, and those connections carry messages both ways (it reads a peer's stream over a
connection it dialed), so every rule that concerns two members needs the member that dialed: the proxy reads the first
request of every connection (etcd's peer traffic is plain HTTP/1.1) for etcd's ``X-Server-From`` header, the sender's
member ID, and ``X-Raft-To``, the ID of the member behind the link (every ID it was named by: a member replaced on its
port has another). A request that names no sender (etcd's prober sends none) is traced to its process instead: the
connection's source port to its socket (the kernel's socket diagnostics), the socket to the member process that
holds it (each link's ``pid``, as the cluster tells it). A connection whose dialer is still unknown (not a member's)
gets only the rules of the member behind its link.

A blackholed member's link refuses every connection, and the other links refuse the connections it dials. A member's
own delay (``delay MS JITTER LINK``) is added to every chunk to and from it: a chunk travels between the member behind
its link and the member that dialed its connection, and its delay is the global one, plus the pair's (``pair``: the
zones they are in), plus the larger of the two members' own (each jitter drawn on its own). A changed delay holds for
the chunks read from then on; none is written before an earlier chunk of its direction. A cut from member A to member
B (``cut A B``) drops what A writes to B and lets what B writes to A pass: the bytes A sends on the connections B
dialed to it, and those it sends on the connections it dialed to B after the request that opened them (so that B's
answers on them, its messages to A, still come); the connections stay open during the cut, as etcd's ``pkg/proxy``
keeps them when it blackholes one direction, and those that lost bytes are closed when it ends (``uncut``): a stream
with a hole in it cannot go on, and the members dial again.

It runs as its own process (``python etcd_users/local/peer_proxy.py``, started and stopped by ``LocalCluster``) so its
CPU is not the load's, and imports nothing but the standard library. Control, one command a line on stdin, each
answered by one line on stdout (``ok ...`` or ``error ...``)::

    delay MS [JITTER_MS]   one-way delay of every link from now on (chunks already queued keep theirs)
    delay MS JITTER_MS LINK
                           the member behind the link's own one-way delay, added to the global one on all its traffic
                           (LINK: its index, or all; delay 0 0 LINK: none again)
    pair MS JITTER_MS A B  the one-way delay between the members behind links A and B, both ways, on top of the global
                           one (their zones; pair 0 0 A B: none again)
    pid LINK PID           the process of the member behind the link, which the connections it dials are traced to
    blackhole LINK         cut the member behind the link off: the connections to it and those it dialed are closed, new
                           ones refused (LINK: its index, or all)
    heal LINK              connect it again
    cut A B                drop what the member behind link A writes to the one behind link B, from now on
    uncut A B              let it pass again; the connections it dropped bytes of are closed (answers how many)
    link LISTEN TARGET     a member added: LISTEN forwarded to TARGET from now on, as the next link (answers its index)
    stats                  the member IDs learnt (joined by +), bytes forwarded and connections, per link
    quit                   stop (so does the end of stdin)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import random
import socket
import struct
import sys
from collections.abc import Sequence

READY = "ready"
# a queue this deep stops reading the sender: memory stays bounded when the receiver is slower than the sender
HIGH_WATER_BYTES = 4 * 1024 * 1024
HEADER_MAX_BYTES = 16 * 1024  # a request's header is read this far for the IDs, no further
SENDER_HEADER = b"x-server-from"
TARGET_HEADER = b"x-raft-to"
TCP_TABLE = "/proc/net/tcp"  # every IPv4 socket of the machine's network namespace: the peers dial 127.0.0.1
LOOPBACK_HEX = "0100007F"  # 127.0.0.1 as the table writes it
# the kernel's socket diagnostics (sock_diag(7)): one socket looked up by its addresses, where the table is read whole
NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST = 4, 20, 1
INET_DIAG_NOCOOKIE = 0xFFFFFFFF
INODE_OFFSET = 16 + 68  # netlink's header, then inet_diag_msg's family, state, timer, retrans, id and four counters


class Link:
    """One member's proxy: ``listen_port`` forwards to ``target_port``, both on 127.0.0.1."""

    def __init__(self, index: int, listen_port: int, target_port: int, proxy: PeerProxy) -> None:
        self.index = index
        self.listen_port = listen_port
        self.target_port = target_port
        self.proxy = proxy
        self.blackholed = False
        self.extra_delay = 0.0  # the member's own one-way delay and jitter (s), on top of the proxy's
        self.extra_jitter = 0.0
        self.pid: int | None = None  # the member's process, which the connections it dials without a sender lead to
        # etcd's IDs of the member behind the link, as requests name it, in the order learnt: a member replaced on the
        # link's port has another, and a peer that has not applied the removal yet may still name the old one after the
        # new one, so the link answers to every ID it was named by (a removed ID never comes back)
        self.member_ids: list[str] = []
        self.server: asyncio.base_events.Server | None = None
        self.pipes: set[_Pipe] = set()
        self.bytes_forwarded = 0
        self.bytes_dropped = 0  # what a cut dropped of the bytes written to or by the member
        self.connections = 0

    async def start(self, sock: socket.socket | None = None) -> None:
        """Serve ``listen_port``, or ``sock`` already listening on it."""
        loop = asyncio.get_running_loop()
        if sock is not None:
            self.server = await loop.create_server(lambda: _Pipe(self), sock=sock)
        else:
            self.server = await loop.create_server(
                lambda: _Pipe(self), "127.0.0.1", self.listen_port, reuse_address=True
            )

    def blackhole(self) -> None:
        self.blackholed = True
        for link in self.proxy.links:
            for pipe in list(link.pipes):
                if link is self or pipe.dialer() is self:
                    pipe.close()

    def heal(self) -> None:
        self.blackholed = False

    def set_extra_delay(self, delay_ms: float, jitter_ms: float) -> None:
        _check_delay(delay_ms, jitter_ms)
        self.extra_delay, self.extra_jitter = delay_ms / 1000, jitter_ms / 1000

    def one_way_delay(self, dialer: Link | None) -> float:
        """A chunk's delay on a connection the member behind ``dialer`` (None when unknown) dialed to this link."""
        own = (self.extra_delay, self.extra_jitter)
        pair = (0.0, 0.0)
        if dialer is not None:
            own = max(own, (dialer.extra_delay, dialer.extra_jitter))
            pair = self.proxy.pairs.get(_pair(self.index, dialer.index), pair)
        return self.proxy.one_way_delay() + _drawn(*own) + _drawn(*pair)

    def refuses(self, dialer: Link | None) -> bool:
        """Whether a connection from the member behind ``dialer`` (None: unknown) is refused here."""
        return self.blackholed or (dialer is not None and dialer.blackholed)


class _Direction:
    """Chunks on their way to ``transport``, each due at its arrival time plus the delay, written in order;
    ``forward``: from the member that dialed to the one behind the link."""

    def __init__(self, link: Link, source: asyncio.Transport, pipe: _Pipe, forward: bool) -> None:
        self.link = link
        self.pipe = pipe  # whose dialer, once known, may add its member's and the pair's delay, or be cut
        self.forward = forward
        self.source = source  # paused while too much is queued
        self.transport: asyncio.Transport | None = None
        self.queue: collections.deque[tuple[float, bytes]] = collections.deque()
        self.queued_bytes = 0
        self.timer: asyncio.TimerHandle | None = None
        self.last_due = 0.0
        self.source_paused = False

    def push(self, data: bytes, opening: bool = False, arrived: float | None = None) -> None:
        """``data`` on its way, unless its writer is cut from its reader (``opening``: the request that opened the
        connection, which passes); its delay counts from ``arrived`` (the loop's time it was read; None: now)."""
        dialer = self.pipe.dialer()
        if not opening and dialer is not None and (cut := self._cut(dialer)) is not None:
            self.link.bytes_dropped += len(data)
            self.pipe.dropped.add(cut)
            return
        loop = asyncio.get_running_loop()
        delay = self.link.one_way_delay(dialer)
        # never before the chunk ahead of it: jitter delays, it does not reorder
        due = max((loop.time() if arrived is None else arrived) + delay, self.last_due)
        self.last_due = due
        if delay <= 0 and not self.queue and self.transport is not None:
            self._write(data)
            return
        self.queue.append((due, data))
        self.queued_bytes += len(data)
        if self.queued_bytes > HIGH_WATER_BYTES and not self.source_paused:
            self.source_paused = True
            self.source.pause_reading()
        self._schedule()

    def _cut(self, dialer: Link) -> tuple[int, int] | None:
        """The cut (writer, reader) that drops this direction's bytes now; None when none does."""
        cuts = self.link.proxy.cuts
        if not cuts:
            return None
        writer, reader = (dialer, self.link) if self.forward else (self.link, dialer)
        cut = (writer.index, reader.index)
        return cut if cut in cuts else None

    def connected(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self._schedule()

    def _schedule(self) -> None:
        if self.timer is None and self.queue and self.transport is not None:
            self.timer = asyncio.get_running_loop().call_at(self.queue[0][0], self._flush)

    def _flush(self) -> None:
        self.timer = None
        if self.transport is None or self.transport.is_closing():
            return
        now = asyncio.get_running_loop().time()
        while self.queue and self.queue[0][0] <= now:
            _, data = self.queue.popleft()
            self.queued_bytes -= len(data)
            self._write(data)
        if self.source_paused and self.queued_bytes <= HIGH_WATER_BYTES // 2:
            self.source_paused = False
            self.source.resume_reading()
        self._schedule()

    def _write(self, data: bytes) -> None:
        self.link.bytes_forwarded += len(data)
        self.transport.write(data)

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.queue.clear()


class _Upstream(asyncio.Protocol):
    """The proxy's connection to the member: what the member sends goes back to the peer that dialed."""

    def __init__(self, pipe: _Pipe) -> None:
        self.pipe = pipe

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.pipe.upstream_made(transport)

    def data_received(self, data: bytes) -> None:
        self.pipe.backward.push(data)

    def eof_received(self) -> bool:
        self.pipe.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.pipe.close()


class _Pipe(asyncio.Protocol):
    """One connection a peer dialed, and the proxy's own to the member behind it."""

    def __init__(self, link: Link) -> None:
        self.link = link
        self.downstream: asyncio.Transport | None = None
        self.upstream: asyncio.Transport | None = None
        self.forward: _Direction | None = None
        self.backward: _Direction | None = None
        self.closed = False
        self.sender: str | None = None  # the member that dialed, once its first request's header says
        self.header: bytearray | None = bytearray()  # that header while it is read; None once read
        self._dialer: Link | None = None  # the link of the member that dialed, once known
        self.dropped: set[tuple[int, int]] = set()  # the cuts (writer, reader) that dropped some of its bytes

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.downstream = transport
        if self.link.blackholed:  # a blackholed link refuses: the peer sees its connection closed at once
            transport.abort()
            self.closed = True
            return
        self.link.pipes.add(self)
        self.link.connections += 1
        self.forward = _Direction(self.link, transport, self, forward=True)
        task = asyncio.get_running_loop().create_task(self._connect())
        task.add_done_callback(_ignore_result)

    async def _connect(self) -> None:
        try:
            await asyncio.get_running_loop().create_connection(
                lambda: _Upstream(self), "127.0.0.1", self.link.target_port
            )
        except OSError:
            self.close()

    def upstream_made(self, transport: asyncio.Transport) -> None:
        if self.closed:
            transport.abort()
            return
        self.upstream = transport
        self.backward = _Direction(self.link, transport, self, forward=False)
        self.backward.connected(self.downstream)
        self.forward.connected(transport)

    def data_received(self, data: bytes) -> None:
        arrived = asyncio.get_running_loop().time()
        opening = 0
        if self.header is not None:
            opening = self._read_header(data)
            if self.closed:
                return
        self._forward(data, arrived, opening)

    def _forward(self, data: bytes, arrived: float, opening: int) -> None:
        if opening:
            self.forward.push(data[:opening], opening=True, arrived=arrived)
            data = data[opening:]
        if data:
            self.forward.push(data, arrived=arrived)

    def dialer(self) -> Link | None:
        """The link of the member that dialed: the one its sender's ID names (learnt from any link's requests), or the
        one its process was traced to; None while unknown."""
        if self._dialer is None and self.sender is not None:
            self._dialer = next((link for link in self.link.proxy.links if self.sender in link.member_ids), None)
        return self._dialer

    def _read_header(self, data: bytes) -> int:
        """Read the first request's header from ``data``: how many of its bytes belong to it."""
        before = len(self.header)
        self.header += data
        end = self.header.find(b"\r\n\r\n")
        if end < 0 and len(self.header) < HEADER_MAX_BYTES:
            return len(data)
        fields = {}
        for line in bytes(self.header[: end if end >= 0 else HEADER_MAX_BYTES]).split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            fields[name.strip().lower()] = value.strip().decode("ascii", "replace")
        self.header = None
        target = fields.get(TARGET_HEADER)
        if target and target not in self.link.member_ids:  # a member replaced on the link's port has another ID
            self.link.member_ids.append(target)
        self.sender = fields.get(SENDER_HEADER)
        if self.sender is None:  # etcd's prober: the member is found by the process that holds the connection
            self._trace()
        elif self.link.refuses(self.dialer()):
            self.close()
        length = end + 4 if end >= 0 else HEADER_MAX_BYTES
        return max(0, min(len(data), length - before))

    def _trace(self) -> None:
        """Find the member whose process dialed, on the loop: one socket diagnostic and the members' descriptors, about
        a millisecond, once per connection that names no sender (a prober's, which stays open for its next probes)."""
        peer = self.downstream.get_extra_info("peername")
        links = self.link.proxy.links
        if not peer or not any(link.pid for link in links):
            return
        self.link.proxy.traces += 1
        self._dialer = dialing_link(links, peer[1], self.link.listen_port)
        if self.link.refuses(self._dialer):
            self.close()

    def eof_received(self) -> bool:
        self.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.close()

    def close(self) -> None:
        """Both sides at once (what a cut cable does; etcd's peers reconnect on their own)."""
        if self.closed:
            return
        self.closed = True
        self.link.pipes.discard(self)
        for direction in (self.forward, self.backward):
            if direction is not None:
                direction.cancel()
        for transport in (self.downstream, self.upstream):
            if transport is not None:
                transport.abort()


def _check_delay(delay_ms: float, jitter_ms: float) -> None:
    # NaN fails every comparison: only a finite delay passes
    if not (0 <= jitter_ms <= delay_ms < float("inf")):
        raise ValueError(f"delay {delay_ms:g} ms with jitter {jitter_ms:g} ms: both >= 0, jitter at most the delay")


def _drawn(delay: float, jitter: float) -> float:
    return delay + random.uniform(-jitter, jitter) if jitter else delay


def _pair(first: int, second: int) -> tuple[int, int]:
    return (first, second) if first < second else (second, first)


def _socket_inode(local_port: int, remote_port: int) -> str | None:
    """The inode of the socket 127.0.0.1:``local_port`` connected to 127.0.0.1:``remote_port``; None when gone. Asked of
    the kernel's socket diagnostics (a fraction of a millisecond), else found in ``TCP_TABLE`` (tens of milliseconds
    on a machine with many sockets: a probe's connection waits for it)."""
    try:
        return _diagnosed_inode(local_port, remote_port)
    except (OSError, struct.error):
        pass
    local, remote = f"{LOOPBACK_HEX}:{local_port:04X}", f"{LOOPBACK_HEX}:{remote_port:04X}"
    try:
        with open(TCP_TABLE) as table:
            for line in table:
                fields = line.split()
                if len(fields) > 9 and fields[1] == local and fields[2] == remote:
                    return fields[9]
    except OSError:
        return None
    return None


def _diagnosed_inode(local_port: int, remote_port: int) -> str | None:
    """``_socket_inode`` by one SOCK_DIAG_BY_FAMILY request for that TCP socket (``OSError`` where netlink is not
    allowed); None when the kernel has no such socket."""
    loopback = socket.inet_aton("127.0.0.1") + bytes(12)
    sockid = struct.pack(">HH", local_port, remote_port) + loopback + loopback
    sockid += struct.pack("=III", 0, INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE)  # any interface, no cookie
    body = struct.pack("=BBBBI", socket.AF_INET, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + sockid  # every TCP state
    header = struct.pack("=IHHII", 16 + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0)
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as diag:
        diag.settimeout(1.0)
        diag.sendto(header + body, (0, 0))
        answer = diag.recv(65536)
    if struct.unpack_from("=H", answer, 4)[0] != SOCK_DIAG_BY_FAMILY:  # NLMSG_ERROR: no such socket
        return None
    return str(struct.unpack_from("=I", answer, INODE_OFFSET)[0])


def dialing_link(links: Sequence[Link], port: int, listen_port: int) -> Link | None:
    """The link of the member whose process holds the connection from 127.0.0.1:``port`` to ``listen_port``; None
    when no member's does (another process, or one that has closed it already)."""
    inode = _socket_inode(port, listen_port)
    if inode is None:
        return None
    wanted = f"socket:[{inode}]"
    for link in links:
        if link.pid is None:
            continue
        folder = f"/proc/{link.pid}/fd"
        try:
            descriptors = os.listdir(folder)
        except OSError:  # the member is gone, or restarting
            continue
        for descriptor in descriptors:
            try:
                if os.readlink(f"{folder}/{descriptor}") == wanted:
                    return link
            except OSError:
                continue
    return None


def _ignore_result(task: asyncio.Task) -> None:
    if not task.cancelled():
        task.exception()


class PeerProxy:
    """Every member's link, with one delay and jitter for all of them."""

    def __init__(self, ports: Sequence[tuple[int, int]], delay_ms: float = 0.0, jitter_ms: float = 0.0) -> None:
        self.links = [Link(index, listen, target, self) for index, (listen, target) in enumerate(ports)]
        self.set_delay(delay_ms, jitter_ms)
        self.pairs: dict[tuple[int, int], tuple[float, float]] = {}  # (lower, higher link): one-way delay, jitter (s)
        self.cuts: set[tuple[int, int]] = set()  # (writer, reader) links whose bytes are dropped
        self.traces = 0  # connections traced to their process (their request named no sender)

    def set_delay(self, delay_ms: float, jitter_ms: float = 0.0) -> None:
        _check_delay(delay_ms, jitter_ms)
        self.delay = delay_ms / 1000
        self.jitter = jitter_ms / 1000

    def one_way_delay(self) -> float:
        if self.jitter:
            return self.delay + random.uniform(-self.jitter, self.jitter)
        return self.delay

    async def start(self) -> None:
        for link in self.links:
            await link.start()

    def add_link(self, listen_port: int, target_port: int) -> Link:
        """A member added to the cluster gets its link: the socket is bound and listening when this returns (a taken
        port is an OSError here), and served as soon as the loop runs again."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", listen_port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        link = Link(len(self.links), listen_port, target_port, self)
        self.links.append(link)
        asyncio.get_running_loop().create_task(link.start(sock)).add_done_callback(_ignore_result)
        return link

    def close(self) -> None:
        for link in self.links:
            link.blackhole()
            if link.server is not None:
                link.server.close()

    def command(self, line: str) -> str:
        """One control command's answer (see the module's docstring)."""
        words = line.split()
        try:
            if not words:
                return "error empty command"
            verb, arguments = words[0], words[1:]
            if verb == "delay" and len(arguments) in (1, 2):
                self.set_delay(*map(float, arguments))
                return f"ok delay {self.delay * 1000:g} {self.jitter * 1000:g}"
            if verb == "delay" and len(arguments) == 3:
                delay_ms, jitter_ms = float(arguments[0]), float(arguments[1])
                for link in self._links(arguments[2]):
                    link.set_extra_delay(delay_ms, jitter_ms)
                return f"ok delay {delay_ms:g} {jitter_ms:g} {arguments[2]}"
            if verb == "pair" and len(arguments) == 4:
                delay_ms, jitter_ms = float(arguments[0]), float(arguments[1])
                _check_delay(delay_ms, jitter_ms)
                first, second = (self._link(argument).index for argument in arguments[2:])
                if delay_ms:
                    self.pairs[_pair(first, second)] = (delay_ms / 1000, jitter_ms / 1000)
                else:
                    self.pairs.pop(_pair(first, second), None)
                return f"ok pair {delay_ms:g} {jitter_ms:g} {first} {second}"
            if verb == "pid" and len(arguments) == 2:
                link = self._link(arguments[0])
                link.pid = int(arguments[1])
                return f"ok pid {link.index} {link.pid}"
            if verb in ("cut", "uncut") and len(arguments) == 2:
                writer, reader = (self._link(argument).index for argument in arguments)
                if writer == reader:
                    raise ValueError(f"a cut from link {writer} to itself")
                if verb == "cut":
                    self.cuts.add((writer, reader))
                    return f"ok cut {writer} {reader}"
                self.cuts.discard((writer, reader))
                return f"ok uncut {writer} {reader} closed {self._close_cut((writer, reader))}"
            if verb in ("blackhole", "heal") and len(arguments) == 1:
                for link in self._links(arguments[0]):
                    link.blackhole() if verb == "blackhole" else link.heal()
                return f"ok {verb} {arguments[0]}"
            if verb == "link" and len(arguments) == 2:
                return f"ok link {self.add_link(int(arguments[0]), int(arguments[1])).index}"
            if verb == "stats" and not arguments:
                return "ok " + " ".join(
                    f"{link.index}:{'+'.join(link.member_ids) or '-'}:{link.bytes_forwarded}:{link.connections}:"
                    f"{len(link.pipes)}"
                    f"{':blackholed' * link.blackholed}"
                    f"{f':delay={link.extra_delay * 1000:g}+-{link.extra_jitter * 1000:g}' if link.extra_delay else ''}"
                    f"{f':dropped={link.bytes_dropped}' if link.bytes_dropped else ''}"
                    for link in self.links
                )
        except (ValueError, IndexError, OSError) as error:
            return f"error {error}"
        return f"error unknown command {line.strip()!r}"

    def _close_cut(self, cut: tuple[int, int]) -> int:
        """Close the connections the cut dropped bytes of: a stream with a hole in it cannot go on (its reader would
        take what follows the hole for a message), as a TCP connection whose retransmissions failed is reset; the
        members dial again. How many were closed."""
        closed = [pipe for link in self.links for pipe in list(link.pipes) if cut in pipe.dropped]
        for pipe in closed:
            pipe.close()
        return len(closed)

    def _links(self, which: str) -> list[Link]:
        if which == "all":
            return self.links
        return [self._link(which)]

    def _link(self, which: str) -> Link:
        if not which.isdigit() or int(which) >= len(self.links):  # int() takes -1, which would name the last link
            raise ValueError(f"no link {which!r}: an index from 0 to {len(self.links) - 1}, or all")
        return self.links[int(which)]


async def _serve(proxy: PeerProxy) -> None:
    await proxy.start()
    print(READY, flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    try:
        while line := (await reader.readline()).decode():
            if line.strip() == "quit":
                break
            print(proxy.command(line), flush=True)
    finally:
        proxy.close()


def _ports(text: str) -> tuple[int, int]:
    listen, _, target = text.partition(":")
    return int(listen), int(target)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m etcd_users.local.peer_proxy",
        description="Forward each LISTEN port on 127.0.0.1 to its TARGET port with a one-way delay; commands on stdin.",
    )
    parser.add_argument("--link", action="append", type=_ports, required=True, metavar="LISTEN:TARGET")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay per direction (RTT/2)")
    parser.add_argument("--jitter-ms", type=float, default=0.0, help="each chunk's delay varies by up to this much")
    args = parser.parse_args(argv)
    try:
        proxy = PeerProxy(args.link, args.delay_ms, args.jitter_ms)
        asyncio.run(_serve(proxy))
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
