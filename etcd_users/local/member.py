"""One member of the local etcd: its ports, data dir and log, and the flags that make it one of the cluster."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

# Fast enough to elect a leader in about a second, slow enough not to flap on a busy 2-core machine.
HEARTBEAT_INTERVAL_MS = 100
ELECTION_TIMEOUT_MS = 1000


@dataclass
class Member:
    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    log_path: Path
    scheme: str = "http"
    metrics_port: int | None = None  # a plain /metrics and /health listener of its own (with TLS)
    process: subprocess.Popen | None = None
    log_file: IO[bytes] | None = field(default=None, repr=False)
    paused: bool = False
    binary: str = ""  # the etcd it runs (an upgrade or a rollback restarts it on another)
    # behind the peer proxy: the member listens here, and its peers dial peer_port, the proxy's
    listen_peer_port: int | None = None
    heartbeat_ms: int = HEARTBEAT_INTERVAL_MS
    election_ms: int = ELECTION_TIMEOUT_MS

    @property
    def client_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.client_port}"

    @property
    def metrics_base_url(self) -> str:
        """Where /metrics and /health answer without certificates."""
        return self.client_url if self.metrics_port is None else f"http://127.0.0.1:{self.metrics_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    @property
    def listen_peer_url(self) -> str:
        return self.peer_url if self.listen_peer_port is None else f"http://127.0.0.1:{self.listen_peer_port}"

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def etcd_command(
        self, binary: str, peers: Sequence[Member], token: str, initial_cluster: str | None = None
    ) -> list[str]:
        """etcd's command line for this member of a new cluster of ``peers``, before TLS, space and extra flags;
        ``initial_cluster`` (``name=peer URL,…``): it joins the existing cluster of those members instead (a member
        added by MemberAdd)."""
        state = "new" if initial_cluster is None else "existing"
        initial_cluster = initial_cluster or ",".join(f"{peer.name}={peer.peer_url}" for peer in peers)
        return [
            binary,
            "--name", self.name,
            "--data-dir", str(self.data_dir),
            "--listen-client-urls", self.client_url,
            "--advertise-client-urls", self.client_url,
            "--listen-peer-urls", self.listen_peer_url,
            "--initial-advertise-peer-urls", self.peer_url,
            "--initial-cluster", initial_cluster,
            "--initial-cluster-state", state,
            "--initial-cluster-token", token,
            "--heartbeat-interval", str(self.heartbeat_ms),
            "--election-timeout", str(self.election_ms),
            "--logger", "zap",
            "--log-level", "warn",
        ]  # fmt: skip
