"""The members' ports on 127.0.0.1: free ones for a new cluster, the saved ones for a kept data dir."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from etcd_users.local.errors import ClusterError

PORTS_FILE = "cluster.json"


def free_ports(count: int) -> list[int]:
    # Hold every socket until all ports are known so that no two members get the same port.
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def load_ports(data_dir: Path, members: int, ports_per_member: int, token: str) -> tuple[list[int], str] | None:
    """The ports and cluster token (``token`` if it saved none) saved in a kept data dir; None when it saved none.

    etcd stores the peer URLs in its data, so a kept data dir must restart on the same ports.
    """
    saved = data_dir / PORTS_FILE
    if not saved.exists():
        return None
    try:
        content = json.loads(saved.read_text())
        ports = [int(port) for port in content["ports"]]
    except (ValueError, KeyError, TypeError) as error:
        raise ClusterError(f"cannot read {saved}: {error}") from None
    if content.get("members") != members:
        raise ClusterError(f"{saved} describes a {content.get('members')}-member cluster, not {members}")
    if len(ports) != ports_per_member * members:
        raise ClusterError(
            f"{saved} was kept with {len(ports) // members} ports per member, and this start needs {ports_per_member} "
            "(TLS adds a metrics port, the peer proxy a port behind it); start it the same way or use another data dir"
        )
    return ports, content.get("token", token)


def save_ports(data_dir: Path, members: int, ports: list[int], token: str) -> None:
    content = {"members": members, "ports": ports, "token": token}
    (data_dir / PORTS_FILE).write_text(json.dumps(content) + "\n")
