"""The peer round trip's parser, raft's timing for it, and the peer proxy: bytes in order, each direction delayed."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import gevent
import pytest
from support import free_port

from etcd_users.features.disruptions import partition
from etcd_users.features.disruptions.actions import ActionError, Done, agreed_leader, leader_of, resolve_pair
from etcd_users.features.disruptions.partition import leadership
from etcd_users.features.disruptions.schedule import parse_item
from etcd_users.local import ClusterError, peer_proxy
from etcd_users.local.peer_links import PROXY_SCRIPT, PeerLinks
from etcd_users.local.peer_proxy import PeerProxy, _diagnosed_inode, _socket_inode, dialing_link
from etcd_users.settings import Endpoint, SettingsError
from etcd_users.settings.network import PeerRtt, parse_peer_rtt, timing_ms, timing_warnings
from etcd_users.transport.errors import EndpointError
from etcd_users.transport.pool import MemberStatus

FLAG = "--etcd-local-peer-rtt"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", None),
        ("  ", None),
        ("10ms", PeerRtt(10.0)),
        ("0ms", PeerRtt(0.0)),
        ("1.5ms", PeerRtt(1.5)),
        ("250us", PeerRtt(0.25)),
        ("0.2s", PeerRtt(200.0)),
        ("10ms±2ms", PeerRtt(10.0, 2.0)),
        ("10ms+-2ms", PeerRtt(10.0, 2.0)),
        ("10ms +- 500us", PeerRtt(10.0, 0.5)),
        ("10ms+/-2ms", PeerRtt(10.0, 2.0)),
    ],
)
def test_a_round_trip_is_a_duration_with_an_optional_jitter(text, expected):
    assert parse_peer_rtt(FLAG, text) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("10", "is not a round trip"),
        ("ten ms", "is not a round trip"),
        ("-10ms", "is not a round trip"),
        ("10ms±", "is not a round trip"),
        ("10ms±2", "is not a round trip"),
        ("10 ms 2ms", "is not a round trip"),
        ("10msms", "is not a round trip"),
        ("nanms", "is not a round trip"),
        ("11s", "is more than 10s"),
        ("2ms±3ms", "the jitter of '2ms±3ms' is more than the round trip"),
    ],
)
def test_a_bad_round_trip_is_one_line_naming_the_option(text, message):
    with pytest.raises(SettingsError) as raised:
        parse_peer_rtt(FLAG, text)
    assert str(raised.value).startswith(f"{FLAG}: ") and message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_each_direction_gets_half_the_round_trip_and_half_the_jitter():
    rtt = PeerRtt(20.0, 4.0)
    assert (rtt.one_way_ms, rtt.one_way_jitter_ms, rtt.max_rtt_ms, str(rtt)) == (10.0, 2.0, 24.0, "20ms±4ms")


def test_timing_defaults_and_etcd_s_own_limits():
    assert timing_ms(0, 0) == (100, 1000)
    assert timing_ms(50, 0) == (50, 1000)
    assert timing_ms(300, 3000) == (300, 3000)
    with pytest.raises(SettingsError, match=r"^--etcd-local-election: 1000 ms is less than 5 heartbeats of 300 ms"):
        timing_ms(300, 0)
    with pytest.raises(SettingsError, match=r"^--etcd-local-election: 60000 ms is more than etcd's limit"):
        timing_ms(0, 60000)
    with pytest.raises(SettingsError, match=r"^--election-timeout: "):
        timing_ms(300, 0, ("--heartbeat-interval", "--election-timeout"))


def test_a_warning_where_the_timing_is_below_etcd_s_tuning_guide():
    assert timing_warnings(None, 1, 5) == []
    assert timing_warnings(PeerRtt(20.0), 100, 1000) == []
    assert timing_warnings(PeerRtt(0.0), 100, 1000) == []
    heartbeat, election = timing_warnings(PeerRtt(150.0, 50.0), 100, 1000)
    assert heartbeat.startswith("--etcd-local-heartbeat: 100 ms is below the peer round trip of up to 200 ms")
    assert election.startswith("--etcd-local-election: 1000 ms is below 10 round trips (2000 ms)")
    assert len(timing_warnings(PeerRtt(150.0), 150, 1000)) == 1  # only the election timeout


# -- the proxy --


class EchoServer:
    """A TCP server on 127.0.0.1 that sends back whatever each connection sends."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(connection,), daemon=True).start()

    @staticmethod
    def _echo(connection: socket.socket) -> None:
        with connection:
            while data := connection.recv(65536):
                connection.sendall(data)

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def echo():
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def proxied(echo, tmp_path):
    """A peer proxy of 20 ms round trip (10 ms each way) with a 4 ms jitter in front of the echo server."""
    links = PeerLinks([(free_port(), echo.port)], PeerRtt(20.0, 4.0), tmp_path / "proxy.log")
    links.start()
    yield links
    links.stop()


def receive_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, got = [], 0
    while got < size:
        chunk = sock.recv(min(65536, size - got))
        assert chunk, f"connection closed after {got} of {size} bytes"
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def test_the_proxy_keeps_each_connection_s_bytes_in_order_under_jitter(proxied):
    port = proxied.links[0][0]
    payload = b"".join(i.to_bytes(4, "big") for i in range(200_000))  # 800 KB, each offset its own number
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sender = threading.Thread(target=lambda: [sock.sendall(payload[i : i + 1000]) for i in range(0, 800_000, 1000)])
        sender.start()
        echoed = receive_exactly(sock, len(payload))
        sender.join()
    assert echoed == payload


def test_the_proxy_delays_each_direction_by_half_the_round_trip(proxied):
    port = proxied.links[0][0]
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(5):
            started = time.monotonic()
            sock.sendall(b"ping")
            assert receive_exactly(sock, 4) == b"ping"
            # a lower bound only: two crossings of at least 10 - 2 ms each (a loaded machine only adds)
            assert time.monotonic() - started >= 2 * (10 - 2) / 1000


def test_a_blackholed_link_closes_its_connections_and_refuses_new_ones_until_healed(proxied):
    port = proxied.links[0][0]
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"a")
        assert receive_exactly(sock, 1) == b"a"
        proxied.blackhole(0)
        assert sock.recv(10) == b""  # closed by the proxy (an abort may also reset it)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"b")
        try:
            assert sock.recv(10) == b""
        except ConnectionResetError:
            pass
    assert proxied.command("stats").endswith(":blackholed")
    proxied.heal(0)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"c")
        assert receive_exactly(sock, 1) == b"c"


def test_the_proxy_answers_a_bad_command_with_an_error_and_goes_on(proxied):
    with pytest.raises(ClusterError, match="refused 'blackhole 7'"):
        proxied.blackhole(7)
    with pytest.raises(ClusterError, match="refused 'jump'"):
        proxied.command("jump")
    assert proxied.command("delay 0") == "ok delay 0 0"


def test_a_command_interrupted_while_it_waits_leaves_the_next_one_its_own_answer(proxied):
    # the run's stop kills a window's greenlet inside its heal, and the window heals again on its way out: the second
    # command gets its own answer, not the first's, and no second read of the pipe runs beside a blocked one
    os.kill(proxied.process.pid, signal.SIGSTOP)  # the proxy frozen: the first command's answer is surely waited for
    try:
        interrupted = gevent.spawn(proxied.blackhole, 0)
        gevent.sleep(0.2)
        interrupted.kill(block=True)
    finally:
        os.kill(proxied.process.pid, signal.SIGCONT)
    assert isinstance(interrupted.value, gevent.GreenletExit)
    assert proxied.command("stats").endswith(":blackholed")  # the first command was carried out all the same
    proxied.heal(0)
    assert ":blackholed" not in proxied.command("stats")


def test_the_proxy_imports_nothing_of_the_package():
    # its process only moves bytes: none of Locust, gevent, gRPC or the package's own imports
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('peer_proxy', {str(PROXY_SCRIPT)!r})\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('etcd_users', 'locust', 'gevent', 'grpc')))\n"
    )
    result = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=30)
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


def _status(member_id: int, leader_id: int | None, term: int = 2, error: str | None = None) -> MemberStatus:
    endpoint = Endpoint(f"http://127.0.0.1:{2379 + member_id}", secure=False)
    return MemberStatus(endpoint, member_id, leader_id, term, "3.5.1", error)


def test_a_leader_is_agreed_only_when_every_answering_member_names_one_that_answers():
    assert agreed_leader([_status(1, 1), _status(2, 1), _status(3, 1)]) == _status(1, 1)
    assert agreed_leader([_status(1, 1), _status(2, 1), _status(3, None, error="DEADLINE_EXCEEDED")]) == _status(1, 1)
    assert agreed_leader([_status(1, 1), _status(2, 2)]) is None  # they disagree
    assert agreed_leader([_status(2, 1), _status(3, 1)]) is None  # the leader they name is not among them (cut off)
    assert agreed_leader([_status(2, 0), _status(3, 0)]) is None  # no leader (an election)
    assert agreed_leader([_status(1, 1), _status(2, 1), _status(3, 0)]) is None  # one in an election, or cut off
    assert agreed_leader([]) is None


def test_an_action_on_the_leader_is_refused_while_the_members_do_not_agree_on_one():
    assert leader_of([_status(1, 1), _status(2, 1)]) == _status(1, 1)
    # a member cut off, or in an election of its own, names none: the others' leader is acted on
    assert leader_of([_status(1, 1), _status(2, 1), _status(3, 0)]) == _status(1, 1)
    with pytest.raises(ActionError, match=r"no leader that every answering member agrees on \(3 of 3 answer\)"):
        leader_of([_status(1, 1), _status(2, 2), _status(3, 0)])
    with pytest.raises(ActionError, match=r"\(2 of 2 answer\)"):
        leader_of([_status(2, 0), _status(3, 0)])


def test_a_partitions_leadership_is_told_in_one_line():
    elected = {
        "leader_before": "http://a",
        "term_before": 2,
        "leader_during": "http://b",
        "term_during": 3,
        "elected_after_s": 1.234,
        "leader_after": "http://b",
        "term_after": 3,
        "settled_after_s": 0.05,
    }
    assert leadership(elected) == (
        "leader http://a before (term 2), http://b elected 1.23 s after the cut (term 3), http://b the leader 0.05 s "
        "after the heal (term 3)"
    )
    kept = {"leader_before": "http://a", "term_before": 2, "leader_during": "http://a", "term_during": 2}
    assert leadership(kept) == (
        "leader http://a before (term 2), http://a kept the lead during the cut, no leader agreed on by every member "
        "10 s after the heal"
    )


def _answers(*polls):
    """A stand-in for the runner's ``call``: each poll's Status answers in turn, or the error it raises."""
    answers = iter(polls)

    def call(_member_statuses):
        answer = next(answers)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    return call


def test_a_cut_is_polled_until_no_member_answers_and_the_others_first_agreeing_on_a_new_leader_is_timed(monkeypatch):
    monkeypatch.setattr(partition, "POLL_S", 0.0)
    election = [_status(1, 0), _status(2, 0), _status(3, 3)]  # 3 is cut off and still names itself
    elected = [_status(1, 1, term=3), _status(2, 1, term=3), _status(3, 3)]
    step = {}
    call = _answers(election, elected, elected, EndpointError("no member answers"))
    partition._leaders_during(call, cut_id=3, before=3, began=time.perf_counter(), step=step)
    assert step["leader_during"] == _status(1, 1).endpoint.url and step["term_during"] == 3
    assert step["elected_after_s"] >= 0
    step = {}
    partition._leaders_during(_answers(RuntimeError("the run stopped")), cut_id=3, before=3, began=0.0, step=step)
    assert step == {}


def test_the_leader_after_a_heal_is_the_first_every_member_answers_and_names(monkeypatch):
    monkeypatch.setattr(partition, "POLL_S", 0.0)
    rejoining = [_status(1, 1), _status(2, 1), _status(3, 0)]
    settled = [_status(1, 1), _status(2, 1), _status(3, 1)]
    step = {}
    call = _answers(EndpointError("no member answers yet"), rejoining, settled)
    partition._leader_after(call, healed=time.perf_counter(), step=step)
    assert step["leader_after"] == _status(1, 1).endpoint.url and step["settled_after_s"] >= 0
    step = {}
    monkeypatch.setattr(partition, "SETTLE_S", 0.0)
    partition._leader_after(_answers(), healed=time.perf_counter(), step=step)  # past SETTLE_S: no poll at all
    assert step == {}


# -- a member's own delay, the proxy driven in-process --


def _header(sender: str | None, target: str) -> bytes:
    sent_by = f"X-Server-From: {sender}\r\n" if sender else ""
    return f"GET /raft/stream/message/x HTTP/1.1\r\nHost: peer\r\n{sent_by}X-Raft-To: {target}\r\n\r\n".encode()


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
    writer.close()


class Members:
    """Three links of an in-process proxy, each in front of an echo server standing for member a, b or c."""

    IDS = ("a", "b", "c")

    def __init__(self, proxy: PeerProxy, servers: list) -> None:
        self.proxy = proxy
        self.servers = servers

    @classmethod
    async def start(cls, delay_ms: float = 0.0) -> Members:
        servers = [await asyncio.start_server(_echo, "127.0.0.1", 0) for _ in cls.IDS]
        ports = [(free_port(), server.sockets[0].getsockname()[1]) for server in servers]
        members = cls(PeerProxy(ports, delay_ms), servers)
        await members.proxy.start()
        for index, member in enumerate(cls.IDS):  # each link learns its member's ID, as etcd's first requests tell it
            await members.round_trip_ms(None, index)
            assert members.proxy.links[index].member_ids == [member]
        return members

    async def round_trip_ms(self, sender: str | None, index: int, target: str | None = None) -> float:
        """The round trip of 4 bytes over a new connection ``sender`` dials to link ``index`` (its header first, naming
        ``target``, by default the link's first member)."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.proxy.links[index].listen_port)
        header = _header(sender, target or self.IDS[index])
        writer.write(header)
        await reader.readexactly(len(header))
        loop = asyncio.get_running_loop()
        started = loop.time()
        writer.write(b"ping")
        await reader.readexactly(4)
        elapsed = (loop.time() - started) * 1000
        writer.close()
        return elapsed

    def close(self) -> None:
        self.proxy.close()
        for server in self.servers:
            server.close()


def _in_process(test):
    async def run():
        members = await Members.start()
        try:
            await test(members)
        finally:
            members.close()

    asyncio.run(run())


def test_a_member_s_delay_is_on_its_own_link_and_on_the_connections_it_dials_not_between_the_others():
    async def test(members: Members) -> None:
        assert members.proxy.command("delay 20 0 1") == "ok delay 20 0 1"  # b: 40 ms more round trip
        to_b = await members.round_trip_ms(None, 1)  # etcd's prober names no sender: the link's member counts
        b_to_a, a_to_b = await members.round_trip_ms("b", 0), await members.round_trip_ms("a", 1)
        c_to_a, a_to_c = await members.round_trip_ms("c", 0), await members.round_trip_ms("a", 2)
        # lower bounds: the proxy never writes a chunk early; the others' pair only by the loop's own latency
        assert min(to_b, b_to_a, a_to_b) >= 40 - 1, (to_b, b_to_a, a_to_b)
        assert max(c_to_a, a_to_c) < 20, (c_to_a, a_to_c)
        assert ":delay=20+-0" in members.proxy.command("stats").split()[2]
        assert members.proxy.command("delay 0 0 1") == "ok delay 0 0 1"  # back to none
        assert await members.round_trip_ms("b", 0) < 20
        assert ":delay" not in members.proxy.command("stats")

    _in_process(test)


def test_a_replaced_member_s_new_id_is_learnt_so_that_its_delay_and_its_cut_follow_it():
    async def test(members: Members) -> None:
        # member c replaced (removed, wiped, added again on the same peer URL): its peers name its new ID, and a peer
        # that has not applied the removal yet may dial the old one after it: the link answers to both
        await members.round_trip_ms(None, 2, target="c2")
        await members.round_trip_ms(None, 2, target="c")
        assert members.proxy.links[2].member_ids == ["c", "c2"]
        assert members.proxy.command("stats").split()[3].split(":")[1] == "c+c2"
        assert members.proxy.command("delay 20 0 2") == "ok delay 20 0 2"
        assert await members.round_trip_ms("c2", 0) >= 40 - 1  # the connections it dials pay its delay
        assert members.proxy.command("delay 0 0 2") == "ok delay 0 0 2"
        assert members.proxy.command("blackhole 2") == "ok blackhole 2"
        # cut both ways: the connections the new member dials are closed as soon as their header names it
        reader, writer = await asyncio.open_connection("127.0.0.1", members.proxy.links[0].listen_port)
        writer.write(_header("c2", "a"))
        try:
            assert await asyncio.wait_for(reader.read(100), 5) == b""
        except ConnectionResetError:
            pass
        writer.close()

    _in_process(test)


def test_a_link_between_two_delayed_members_takes_the_larger_delay_on_top_of_the_global_one():
    async def test(members: Members) -> None:
        members.proxy.set_delay(5.0)
        members.proxy.command("delay 100 0 0")
        members.proxy.command("delay 150 0 1")
        # 2 × (5 + max(100, 150)) = 310 ms; the sum of the two members' would be 510: margins a loaded machine keeps
        assert 310 - 1 <= await members.round_trip_ms("b", 0) < 510, "b dialed a"
        assert 310 - 1 <= await members.round_trip_ms("a", 1) < 510, "a dialed b"
        assert 210 - 1 <= await members.round_trip_ms("c", 0) < 310, "c dialed a: a's own and the global one"

    _in_process(test)


def test_a_delay_removed_mid_stream_never_writes_a_later_chunk_before_an_earlier_one():
    async def test(members: Members) -> None:
        members.proxy.command("delay 50 0 1")
        reader, writer = await asyncio.open_connection("127.0.0.1", members.proxy.links[1].listen_port)
        header = _header("a", "b")
        writer.write(header)
        await reader.readexactly(len(header))
        writer.write(b"first")
        await asyncio.sleep(0.005)  # read by the proxy under the delay
        members.proxy.command("delay 0 0 1")
        writer.write(b"second")
        assert await reader.readexactly(11) == b"firstsecond"
        writer.close()

    _in_process(test)


@pytest.mark.parametrize(
    "line, answer",
    [
        ("delay 20 2 1", "ok delay 20 2 1"),
        ("delay 20 2 all", "ok delay 20 2 all"),
        ("delay 5", "ok delay 5 0"),  # the global form is unchanged
        ("delay 5 1", "ok delay 5 1"),
        ("delay 20 2 3", "error no link '3': an index from 0 to 2, or all"),
        ("delay 20 2 -1", "error no link '-1': an index from 0 to 2, or all"),
        ("delay 2 3 0", "error delay 2 ms with jitter 3 ms: both >= 0, jitter at most the delay"),
        ("delay nan 0 0", "error delay nan ms with jitter 0 ms: both >= 0, jitter at most the delay"),
        ("delay 1 0 0 0", "error unknown command 'delay 1 0 0 0'"),
        ("blackhole -1", "error no link '-1': an index from 0 to 2, or all"),
    ],
)
def test_the_delay_commands_answer_in_one_line(line, answer):
    proxy = PeerProxy([(free_port(), free_port()) for _ in range(3)])
    assert proxy.command(line) == answer


def test_the_cluster_sets_and_clears_a_member_s_round_trip_through_the_proxy_process(proxied):
    proxied.delay(0, PeerRtt(40.0, 10.0))
    assert proxied.command("stats").split()[1].endswith(":delay=20+-5")
    proxied.undelay(0)
    assert ":delay" not in proxied.command("stats")
    with pytest.raises(ClusterError, match=r"refused 'delay 20 0 3'"):
        proxied.delay(3, PeerRtt(40.0))


def test_a_delay_s_leadership_is_told_in_one_line():
    kept = {"leader_before": "http://a", "term_before": 2, "leader_during": "http://a", "term_during": 2}
    kept |= {"leader_after": "http://a", "term_after": 2, "settled_after_s": 0.0}
    assert leadership(kept, partition.DELAYED) == (
        "leader http://a before (term 2), http://a kept the lead during the delay, http://a the leader 0.00 s after "
        "its end (term 2)"
    )
    assert "no leader agreed on by the members during the delay" in leadership({}, partition.DELAYED)


def test_a_member_added_gets_a_link_that_forwards_and_is_cut_like_the_others():
    async def test(members: Members) -> None:
        server = await asyncio.start_server(_echo, "127.0.0.1", 0)
        members.servers.append(server)
        listen = free_port()
        answer = members.proxy.command(f"link {listen} {server.sockets[0].getsockname()[1]}")
        assert answer == "ok link 3" and members.proxy.links[3].listen_port == listen
        assert await members.round_trip_ms("a", 3, target="d") < 20  # served as soon as the loop ran again
        assert members.proxy.links[3].member_ids == ["d"]
        assert members.proxy.command("delay 20 0 3") == "ok delay 20 0 3"
        assert await members.round_trip_ms("a", 3, target="d") >= 40 - 1
        assert members.proxy.command("blackhole 3") == "ok blackhole 3"
        with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
            await members.round_trip_ms("a", 3, target="d")
        # a port already taken is refused in the answer, and the proxy goes on
        assert members.proxy.command(f"link {listen} 1").startswith("error ")
        assert members.proxy.command("link 1").startswith("error unknown command")

    _in_process(test)


# -- per pair of members, traced probes, one-way cuts --


def test_a_pair_s_delay_is_between_its_two_members_both_ways_and_no_other():
    async def test(members: Members) -> None:
        assert members.proxy.command("pair 20 0 0 1") == "ok pair 20 0 0 1"  # a and b: 40 ms more round trip
        a_to_b, b_to_a = await members.round_trip_ms("a", 1), await members.round_trip_ms("b", 0)
        c_to_a, a_to_c, c_to_b = [await members.round_trip_ms(*hop) for hop in (("c", 0), ("a", 2), ("c", 1))]
        # lower bounds: the proxy never writes a chunk early; the other pairs only by the loop's own latency
        assert min(a_to_b, b_to_a) >= 40 - 1, (a_to_b, b_to_a)
        assert max(c_to_a, a_to_c, c_to_b) < 20, (c_to_a, a_to_c, c_to_b)
        assert members.proxy.command("pair 0 0 1 0") == "ok pair 0 0 1 0"  # none again, either order
        assert await members.round_trip_ms("a", 1) < 20

    _in_process(test)


def test_a_pair_adds_to_the_global_delay_and_to_the_larger_delay_of_its_members():
    async def test(members: Members) -> None:
        members.proxy.set_delay(5.0)
        members.proxy.command("pair 50 0 0 1")
        members.proxy.command("delay 100 0 1")
        # 2 × (5 + 50 + 100) = 310 ms: a zone's round trip and a member's delay add up
        assert 310 - 1 <= await members.round_trip_ms("a", 1) < 510
        assert 210 - 1 <= await members.round_trip_ms("c", 1) < 310, "c and b: b's own and the global one"

    _in_process(test)


def test_a_connection_that_names_no_sender_is_traced_to_the_member_process_that_dialed_it():
    async def test(members: Members) -> None:
        members.proxy.command("pair 20 0 0 1")
        assert await members.round_trip_ms(None, 0) < 20  # no member's process known: only the link's own rules
        # this process stands for member b: its connections are b's, as etcd's prober's are its member's
        assert members.proxy.command(f"pid 1 {os.getpid()}") == f"ok pid 1 {os.getpid()}"
        assert await members.round_trip_ms(None, 0) >= 40 - 1
        assert members.proxy.traces == 1  # traced once a member's process is known
        assert members.proxy.command("blackhole 1") == "ok blackhole 1"  # b's probes are cut off with it
        with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
            await members.round_trip_ms(None, 0)

    _in_process(test)


def test_a_socket_is_traced_to_the_process_that_holds_it_or_to_none(monkeypatch):
    class Linked:  # a link as the tracing reads it: the process of its member
        def __init__(self, pid: int | None) -> None:
            self.pid = pid

    with socket.create_server(("127.0.0.1", 0)) as server, socket.create_connection(server.getsockname()) as client:
        mine, other, unknown = Linked(os.getpid()), Linked(1), Linked(None)
        port, listen = client.getsockname()[1], server.getsockname()[1]
        assert dialing_link([unknown, other, mine], port, listen) is mine
        assert dialing_link([unknown, other], port, listen) is None
        assert dialing_link([mine], port, listen + 1) is None  # no such connection
        # the kernel's socket diagnostics and its table name the one socket the client holds, and neither names another
        inode = str(os.fstat(client.fileno()).st_ino)
        assert _diagnosed_inode(port, listen) == inode and _socket_inode(port, listen) == inode
        assert _diagnosed_inode(port, listen + 1) is None
        # where netlink is refused (a protocol the kernel does not have, here), the table is read instead
        monkeypatch.setattr(peer_proxy, "NETLINK_SOCK_DIAG", 31)
        with pytest.raises(OSError):
            _diagnosed_inode(port, listen)
        assert _socket_inode(port, listen) == inode and _socket_inode(port, listen + 1) is None


async def _exchange(members: Members, sender: str, index: int, target: str, data: bytes) -> bytes:
    """What comes back over a new connection ``sender`` dials to link ``index`` when it writes its header, naming
    ``target``, then ``data``: every byte the echo sends until it has been quiet for 0.3 s."""
    reader, writer = await asyncio.open_connection("127.0.0.1", members.proxy.links[index].listen_port)
    received = b""
    try:
        writer.write(_header(sender, target))
        await asyncio.sleep(0.05)  # the header read on its own, as etcd's first request is
        writer.write(data)
        while chunk := await asyncio.wait_for(reader.read(65536), 0.3):
            received += chunk
    except asyncio.TimeoutError:
        pass
    finally:
        writer.close()
    return received


def test_a_one_way_cut_drops_what_the_first_member_writes_to_the_second_and_passes_the_rest():
    async def test(members: Members) -> None:
        assert members.proxy.command("cut 0 1") == "ok cut 0 1"  # a's bytes to b are dropped
        header_ab, header_ba = _header("a", "b"), _header("b", "a")
        # a dialed b: its request opens the connection and reaches b, whose answer (the echo) reaches a; what a
        # writes after it is dropped. b dialed a: what b writes reaches a, and a's answers (the echo) are dropped
        assert await _exchange(members, "a", 1, "b", b"ping") == header_ab
        assert await _exchange(members, "b", 0, "a", b"ping") == b""
        # the other pairs, and b's messages on connections it dialed elsewhere, are left alone
        assert await _exchange(members, "c", 0, "a", b"ping") == _header("c", "a") + b"ping"
        assert await _exchange(members, "b", 2, "c", b"ping") == _header("b", "c") + b"ping"
        assert ":dropped=" in members.proxy.command("stats").split()[1]
        # a connection open across the cut's end lost bytes: closed at the end, a stream with a hole cannot go on
        reader, writer = await asyncio.open_connection("127.0.0.1", members.proxy.links[0].listen_port)
        writer.write(header_ba)
        await asyncio.sleep(0.05)
        writer.write(b"lost")  # echoed by a, dropped
        await asyncio.sleep(0.3)
        assert members.proxy.command("uncut 0 1") == "ok uncut 0 1 closed 1"
        assert await asyncio.wait_for(reader.read(), 2) == b""  # its end, none of what was dropped
        writer.close()
        assert await _exchange(members, "b", 0, "a", b"pong") == header_ba + b"pong"
        assert members.proxy.command("uncut 0 1") == "ok uncut 0 1 closed 0"  # a connection that lost nothing stays
        assert members.proxy.command("cut 1 1") == "error a cut from link 1 to itself"
        assert members.proxy.command("cut 0 3") == "error no link '3': an index from 0 to 2, or all"

    _in_process(test)


def test_the_cluster_s_proxy_process_takes_pairs_processes_and_cuts_as_commands(proxied):
    proxied.member_pid(0, os.getpid())
    with pytest.raises(ClusterError, match=r"refused 'pair 5 1 0 1': error no link '1'"):
        proxied.pair(0, 1, PeerRtt(10.0, 2.0))
    with pytest.raises(ClusterError, match=r"refused 'cut 0 0': error a cut from link 0 to itself"):
        proxied.cut(0, 0)
    with pytest.raises(ClusterError, match=r"refused 'pid 0 x'"):
        proxied.command("pid 0 x")


def test_a_cut_names_two_members_and_a_follower_second_is_another_follower():
    leader, first, second = _status(1, 1), _status(2, 1), _status(3, 1)
    statuses = [leader, first, second]
    assert resolve_pair("leader", "follower", statuses) == (leader, first)
    assert resolve_pair("follower", "follower", statuses) == (first, second)
    assert resolve_pair("follower", "leader", statuses) == (first, leader)
    assert resolve_pair(second.endpoint.url, "follower", statuses) == (second, first)
    with pytest.raises(ActionError, match=r"^no follower other than http://127.0.0.1:2381 answers"):
        resolve_pair("follower", "follower", [leader, first])
    with pytest.raises(ActionError, match=r"^http://127.0.0.1:2380 and leader are one member now"):
        resolve_pair(leader.endpoint.url, "leader", statuses)


class _Links:
    """A local etcd's links as a one-way cut drives them, recorded."""

    def __init__(self, statuses: list[MemberStatus]) -> None:
        self.endpoints = [status.endpoint.url for status in statuses]
        self.calls: list[tuple[str, int, int]] = []

    def cut_link(self, writer: int, reader: int) -> None:
        self.calls.append(("cut", writer, reader))

    def mend_link(self, writer: int, reader: int) -> None:
        self.calls.append(("mend", writer, reader))


def test_a_one_way_cut_is_mended_after_its_duration_and_its_window_tells_the_leadership(monkeypatch):
    monkeypatch.setattr(partition, "POLL_S", 0.01)
    statuses = [_status(1, 1), _status(2, 1), _status(3, 1)]
    cluster, done = _Links(statuses), Done()
    partition.cut(cluster, statuses, parse_item("cut:leader->follower@1s+0.2s"), done, lambda _ask: statuses)
    leader, follower = cluster.endpoints[:2]
    assert cluster.calls == [("cut", 0, 1), ("mend", 0, 1)]
    assert done.members == [leader, follower]
    assert done.result.startswith(f"{leader}'s messages to {follower} dropped (its messages to {leader} passed) for ")
    assert done.result.endswith(
        f"{leader} kept the lead during the cut, {leader} the leader 0.00 s after its end (term 2)"
    )
    [step] = done.steps
    assert (step["member"], step["to"], step["leader_before"], step["leader_during"]) == (
        leader,
        follower,
        leader,
        leader,
    )


def test_a_one_way_cut_interrupted_by_the_run_s_stop_is_mended_on_the_way_out():
    statuses = [_status(1, 1), _status(2, 1), _status(3, 1)]
    cluster = _Links(statuses)
    window = gevent.spawn(
        partition.cut, cluster, statuses, parse_item("cut:follower->leader@1s+30s"), Done(), lambda _ask: statuses
    )
    gevent.sleep(0.2)
    window.kill(block=True)
    assert cluster.calls == [("cut", 1, 0), ("mend", 1, 0)]
