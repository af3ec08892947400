"""What etcd's refusal of the user at start means for the options, in one line: authentication without
--etcd-user, a user that may not read or write the prefix, and the command that grants it."""

import shlex

import grpc

from etcd_users.core.arguments import shown
from etcd_users.settings import EtcdSettings
from etcd_users.transport.errors import error_detail

PERMISSION_DENIED = "etcdserver: permission denied"


def who(settings: EtcdSettings) -> str:
    user = settings.credentials.user
    return f"--etcd-user {user!r}" if user else "the user of the client certificate (--etcd-cert)"


def grant(settings: EtcdSettings, roles: tuple[str, ...]) -> str:
    """How to let the user write the prefix: the command, with the user's role when etcd told it."""
    prefix = shlex.quote(settings.prefix.decode(errors="replace"))
    if len(roles) == 1:
        whose = f"grant its role {roles[0]!r}"
    elif roles:
        whose = f"grant one of its roles ({', '.join(map(repr, roles))})"
    else:
        whose = "grant its role"
    role = shlex.quote(roles[0]) if roles else "ROLE"
    return f"{whose} readwrite on the prefix (etcdctl role grant-permission {role} --prefix readwrite {prefix})"


def access_problem(error: grpc.aio.AioRpcError, settings: EtcdSettings, roles: tuple[str, ...] = ()) -> str:
    """What an etcd refusal at start means for the options."""
    prefix = shown(settings.prefix.decode(errors="replace"))
    detail = error_detail(error)
    if detail == "etcdserver: user name is empty":
        return f"etcd has authentication enabled ({detail}); pass --etcd-user NAME:PASSWORD"
    if detail == PERMISSION_DENIED:
        return (
            f"{who(settings)} may not read and write {prefix} ({detail}); {grant(settings, roles)} or use "
            "another --etcd-prefix"
        )
    return f"etcd refused the start-up check under {prefix}: {detail}"
