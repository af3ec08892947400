"""Refuse, as the command line is parsed, a master whose port another process holds.

Locust binds the master's port only when it creates its runner: by then ``--processes`` has forked its workers, and a
port already taken (another run's master on the same machine) ends the master with a traceback while the forked
workers go on dialling it for five minutes. Checked right after the parse, before the fork, it is one line and exit 2.
"""

from __future__ import annotations

import errno
import socket

from etcd_users.core.user_classes import locust_main_locals


def master_port_error(options) -> str:
    """Why the master of these options could not bind its port, empty when it can (or when there is no master)."""
    if getattr(options, "worker", False) or not (getattr(options, "master", False) or getattr(options, "processes", 0)):
        return ""
    host = options.master_bind_host if options.master_bind_host not in ("*", "") else ""
    port = options.master_bind_port
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as ZeroMQ binds: a closed run's port is free
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                return ""  # an address Locust will report itself
            workers = "(the forked workers dial it)" if options.processes else "on the master and the workers"
            return (
                f"argument --master-bind-port: port {port} is in use (another Locust master on this machine?): "
                f"give a free port P as --master-bind-port P --master-port P {workers}"
            )
    return ""


def command_line_before_the_runner() -> bool:
    """The parser being built is the one ``locust.main.main()`` parses the command line with before it makes its
    runner: not the one its web UI builds later to list the form's options (the master's port is its own by then),
    nor one built elsewhere."""
    found = locust_main_locals()
    return found is not None and "runner" not in found


def check_master_port(parser) -> None:
    """Wrap the parser Locust's ``main()`` parses the command line with, so that its parse ends with this check."""
    parse_known_args = parser.parse_known_args

    def parse_known_args_then_check(*args, **kwargs):
        namespace, extras = parse_known_args(*args, **kwargs)
        error = master_port_error(namespace)
        if error:
            parser.error(error)
        return namespace, extras

    parser.parse_known_args = parse_known_args_then_check
