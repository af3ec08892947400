"""TLS on the local members' client URLs."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class ClusterTLS:
    """TLS on the members' client URLs (``https://``); peer traffic stays plain http on 127.0.0.1.

    With TLS each member also serves /metrics and /health on a plain ``--listen-metrics-urls`` port of its own,
    so that health checks and scrapes need no certificates. ``client_cert_file``/``client_key_file`` (signed by
    ``ca_file``) are what the cluster's own gRPC calls (``enable_auth``) present when ``client_cert_auth`` is on.
    """

    cert_file: str | os.PathLike
    key_file: str | os.PathLike
    ca_file: str | os.PathLike
    client_cert_auth: bool = False
    client_cert_file: str | os.PathLike | None = None
    client_key_file: str | os.PathLike | None = None

    def server_args(self) -> list[str]:
        args = ["--cert-file", str(self.cert_file), "--key-file", str(self.key_file)]
        if self.client_cert_auth:
            # etcd requires a client certificate whenever --trusted-ca-file is given, client-cert-auth or not
            args += ["--trusted-ca-file", str(self.ca_file), "--client-cert-auth"]
        return args
