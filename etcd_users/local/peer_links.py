"""The peer proxy's process (``peer_proxy``), seen from the local cluster: started, told what to do, stopped."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
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
        line = self._read_line(START_TIMEOUT_SECONDS)
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
            answer = self._read_line(ANSWER_TIMEOUT_SECONDS)
        if not answer.startswith("ok"):
            raise ClusterError(f"the peer proxy refused {line!r}: {answer or 'no answer'}")
        return answer

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

    def _read_line(self, timeout: float) -> str:
        """The proxy's next line, or '' when it gives none in time (a reader thread: pipes have no timeout)."""
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if reader.is_alive():
            # a proxy that does not answer is stopped, and reaped: a later command finds it gone rather than start a
            # second read of the pipe beside the one still blocked on it
            self.process.kill()
            self.process.wait()
            return ""
        return lines[0].strip() if lines else ""

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace").strip().splitlines()[-1]
        except (OSError, IndexError):
            return "no output"
