"""The peer proxy's process (``peer_proxy``), seen from the local cluster: started, told what to do, stopped."""

from __future__ import annotations

import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from etcd_users.local.errors import ClusterError
from etcd_users.local.peer_proxy import READY
from etcd_users.settings.network import PeerRtt

START_TIMEOUT_SECONDS = 10.0
ANSWER_TIMEOUT_SECONDS = 5.0
# the proxy runs the module by its path: none of the package's imports in a process that only moves bytes
PROXY_SCRIPT = Path(__file__).with_name("peer_proxy.py")


class PeerLinks:
    """One proxy process for every member's peer port: ``links`` are (the port peers dial, the member's own)."""

    def __init__(self, links: Sequence[tuple[int, int]], peer_rtt: PeerRtt, log_path: Path) -> None:
        self.links = list(links)
        self.peer_rtt = peer_rtt
        self.log_path = log_path
        self.process: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()  # one command and its answer at a time
        # one reader for the proxy's whole life: a second read of the pipe beside one still blocked (a command whose
        # wait was interrupted) is a RuntimeError under gevent, whose greenlets share the OS thread the pipe's lock
        # knows. Each line the proxy prints answers one command, in order: a command's answer is the line numbered
        # like it, the answers of interrupted commands are passed over.
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._sent = 0
        self._answered = 0

    def start(self) -> None:
        arguments = [f"--link={listen}:{target}" for listen, target in self.links]
        arguments += [f"--delay-ms={self.peer_rtt.one_way_ms:g}", f"--jitter-ms={self.peer_rtt.one_way_jitter_ms:g}"]
        setpriv = shutil.which("setpriv")
        command = [sys.executable, "-I", str(PROXY_SCRIPT), *arguments]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [setpriv, "--pdeathsig", "KILL", "--", *command] if setpriv else command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                bufsize=1,
                start_new_session=True,  # a Ctrl-C reaches the tool, which stops the proxy after the members
            )
        self._lines, self._sent, self._answered = queue.Queue(), 0, 0
        threading.Thread(target=self._read_lines, args=(self.process.stdout, self._lines), daemon=True).start()
        line = self._next_line(time.monotonic() + START_TIMEOUT_SECONDS)
        if line != READY:
            self.stop()
            raise ClusterError(f"the peer proxy did not start: {line or self._log_tail()} (log: {self.log_path})")

    def command(self, line: str) -> str:
        """Send one control line; its answer (``ok ...``), or ClusterError for ``error ...`` or no answer."""
        with self._lock:
            if self.process is None or self.process.poll() is not None:
                raise ClusterError(f"the peer proxy is not running (log: {self.log_path})")
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
            self._sent += 1
            answer = self._answer(self._sent, time.monotonic() + ANSWER_TIMEOUT_SECONDS)
        if not answer.startswith("ok"):
            raise ClusterError(f"the peer proxy refused {line!r}: {answer or 'no answer'}")
        return answer

    def link(self, listen_port: int, target_port: int) -> int:
        """A member added to the cluster: ``listen_port`` (the port its peers dial) forwarded to ``target_port`` (its
        own) from now on; the link's index, the member's."""
        answer = self.command(f"link {listen_port} {target_port}")
        self.links.append((listen_port, target_port))
        return int(answer.split()[-1])

    def blackhole(self, index: int) -> None:
        """Member ``index``'s peer port: its connections closed, new ones refused."""
        self.command(f"blackhole {index}")

    def heal(self, index: int) -> None:
        self.command(f"heal {index}")

    def delay(self, index: int, rtt: PeerRtt) -> None:
        """Member ``index``'s own round trip, on top of every link's: half of it (and of its jitter) each way of all
        its traffic."""
        self.command(f"delay {rtt.one_way_ms:g} {rtt.one_way_jitter_ms:g} {index}")

    def undelay(self, index: int) -> None:
        self.command(f"delay 0 0 {index}")

    def pair(self, first: int, second: int, rtt: PeerRtt | None) -> None:
        """The round trip between members ``first`` and ``second`` (their zones'), on top of every link's: half of it
        (and of its jitter) each way; None: none."""
        one_way, jitter = (rtt.one_way_ms, rtt.one_way_jitter_ms) if rtt is not None else (0.0, 0.0)
        self.command(f"pair {one_way:g} {jitter:g} {first} {second}")

    def member_pid(self, index: int, pid: int) -> None:
        """Member ``index`` runs as ``pid`` now: the connections it dials without naming itself are traced to it."""
        self.command(f"pid {index} {pid}")

    def cut(self, writer: int, reader: int) -> None:
        """What member ``writer`` sends member ``reader`` dropped; what ``reader`` sends ``writer`` passes."""
        self.command(f"cut {writer} {reader}")

    def uncut(self, writer: int, reader: int) -> None:
        self.command(f"uncut {writer} {reader}")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        try:
            process.stdin.write("quit\n")
            process.stdin.close()
        except OSError:
            pass
        try:
            process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()

    @staticmethod
    def _read_lines(stdout, lines: queue.Queue) -> None:
        try:
            for line in stdout:
                lines.put(line.strip())
        except (OSError, ValueError):  # closed by stop()
            pass
        lines.put(None)

    def _answer(self, number: int, deadline: float) -> str:
        """The answer to the command sent ``number``-th, or '' when the proxy gives none by ``deadline``."""
        while self._answered < number:
            line = self._next_line(deadline)
            if line is None:
                return ""
            self._answered += 1
        return line

    def _next_line(self, deadline: float) -> str | None:
        """The proxy's next line; None when it gives none by ``deadline`` or has ended."""
        try:
            line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None
        if line is None:
            self._lines.put(None)  # the end stays seen by every later read
        return line

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace").strip().splitlines()[-1]
        except (OSError, IndexError):
            return "no output"
