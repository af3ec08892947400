"""Authentication on the local etcd: user root, optionally one user limited to a prefix, then auth on."""

from __future__ import annotations

import os
from pathlib import Path

from etcd_users.local.errors import ClusterError
from etcd_users.local.tls import ClusterTLS
from etcd_users.settings import parse_prefix
from etcd_users.workload_model.keys import prefix_range_end


def check_user(user: str | None, password: str | None, prefix: str | bytes | None) -> None:
    """ValueError unless ``user`` comes with a password and a prefix that is a directory (or none of them)."""
    if (user is None) != (password is None) or (user is not None and prefix is None):
        raise ValueError("a user needs a password and a prefix")
    if prefix is not None:  # a directory: the role of /locust-etcd would also cover /locust-etcd-sentinel
        parse_prefix(prefix if isinstance(prefix, str) else prefix.decode(errors="surrogateescape"), "prefix")


def enable_auth(
    client_port: int,
    tls: ClusterTLS | None,
    root_password: str,
    user: str | None,
    password: str | None,
    prefix: str | bytes | None,
    timeout: float,
) -> None:
    """Through the member on ``client_port``: create ``root`` and ``user`` (see ``check_user``), then turn auth on."""
    import grpc  # only here: the launcher itself needs neither grpc nor etcd3
    from etcd3.etcdrpc import auth_pb2, rpc_pb2, rpc_pb2_grpc

    prefix_bytes = prefix.encode() if isinstance(prefix, str) else prefix
    channel = _grpc_channel(client_port, tls)
    try:
        auth = rpc_pb2_grpc.AuthStub(channel)
        calls = [
            (auth.RoleAdd, rpc_pb2.AuthRoleAddRequest(name="root")),
            (auth.UserAdd, rpc_pb2.AuthUserAddRequest(name="root", password=root_password)),
            (auth.UserGrantRole, rpc_pb2.AuthUserGrantRoleRequest(user="root", role="root")),
        ]
        if user is not None:
            permission = auth_pb2.Permission(
                permType=auth_pb2.Permission.READWRITE, key=prefix_bytes, range_end=prefix_range_end(prefix_bytes)
            )
            calls += [
                (auth.RoleAdd, rpc_pb2.AuthRoleAddRequest(name=user)),
                (auth.RoleGrantPermission, rpc_pb2.AuthRoleGrantPermissionRequest(name=user, perm=permission)),
                (auth.UserAdd, rpc_pb2.AuthUserAddRequest(name=user, password=password)),
                (auth.UserGrantRole, rpc_pb2.AuthUserGrantRoleRequest(user=user, role=user)),
            ]
        calls.append((auth.AuthEnable, rpc_pb2.AuthEnableRequest()))
        for method, request in calls:
            try:
                method(request, timeout=timeout)
            except grpc.RpcError as error:  # never the request itself: it holds a password
                step = type(request).__name__
                raise ClusterError(f"enabling authentication: {step}: {error.details()}") from None
    finally:
        channel.close()


def _grpc_channel(client_port: int, tls: ClusterTLS | None):
    """A blocking gRPC channel to the member on ``client_port``, with the cluster's CA and client certificate."""
    import grpc

    target = f"127.0.0.1:{client_port}"
    if tls is None:
        return grpc.insecure_channel(target)

    def read(path: str | os.PathLike | None) -> bytes | None:
        return Path(path).read_bytes() if path is not None else None

    if tls.client_cert_auth and tls.client_cert_file is None:
        raise ClusterError("--client-cert-auth: the cluster's own calls need ClusterTLS.client_cert_file and key")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=read(tls.ca_file),
        private_key=read(tls.client_key_file),
        certificate_chain=read(tls.client_cert_file),
    )
    return grpc.secure_channel(target, credentials)
