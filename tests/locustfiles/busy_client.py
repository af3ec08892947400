"""Users whose own work is the bottleneck: a load generator out of CPU, with no server at all.

Each task spins on the process's CPU clock for ``BUSY_CLIENT_SPIN_MS`` (default 2 ms), then fires a ``busy`` request
of 0.5 ms. While fewer than ``BUSY_CLIENT_FROM_USERS`` users run in the process (default 1: always) the users are
quiet instead: no spin, a request every 50 ms each. With the ladder shape (``shapes/ladder.py --shape-ladder 1,2``
and ``BUSY_CLIENT_FROM_USERS=2``) the first level is quiet and the second keeps its process busy.
"""

from locust import User, constant, events, task

import os
import time

from etcd_users.core import plugin

# the exact latencies and the client CPU alone: these users are not etcd's
plugin.install(events, etcd=False)

REQUEST_TYPE = "synthetic"
SPIN_SECONDS = float(os.environ.get("BUSY_CLIENT_SPIN_MS", "2")) / 1000.0
FROM_USERS = int(os.environ.get("BUSY_CLIENT_FROM_USERS", "1"))
QUIET_WAIT_SECONDS = 0.05


class BusyClientUser(User):
    wait_time = constant(0)

    @task
    def request(self) -> None:
        runner = self.environment.runner
        if runner is not None and runner.user_count < FROM_USERS:
            time.sleep(QUIET_WAIT_SECONDS)  # gevent's, under Locust's patching: the other greenlets run
        else:
            until = time.process_time() + SPIN_SECONDS
            while time.process_time() < until:
                pass
        self.environment.events.request.fire(
            request_type=REQUEST_TYPE,
            name="busy",
            response_time=0.5,
            response_length=0,
            exception=None,
            context={},
        )
