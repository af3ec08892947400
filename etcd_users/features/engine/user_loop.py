"""A ready workload's user on the loop thread, seen from its greenlet: the greenlet keeps the user's place in Locust
(spawned, counted, stopped), the coroutine sends the requests.

``run_on_loop`` starts the user's coroutine on the loop thread and waits for it. The coroutine runs while the user's
state is running: a graceful stop (``--stop-timeout``) ends it after its current request, as a greenlet's loop ends.
Whatever ends the greenlet (Locust killing it as ``-u`` goes down or the run stops, a shape's next level, the web UI's
stop, Ctrl-C, a request listener's ``StopUser``) ends the coroutine first: the greenlet marks the user as stopping
(``LoopClient.stop``: from then on the coroutine sends nothing, not even the next call of an operation of several),
lets a call on the wire finish (its answer not reported), cancels the task and waits until it has ended, so a
coroutine never outlives its user. An error of the coroutine is raised in the greenlet, where Locust reports it as it
reports a task's.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import asyncio

import gevent

from etcd_users.features.engine.client import LoopClient
from etcd_users.features.engine.locust_adapter import user_running
from etcd_users.features.engine.repeat import repeat
from etcd_users.workload_model.workloads import Workload


class LoopUser:
    """One Locust user's request loop as a task on the loop thread."""

    running = 0  # the process's users whose coroutine runs now (loop thread)
    answered_unreported = 0  # calls on the wire when their user stopped, answered and not reported (gevent thread)

    def __init__(self, user, client: LoopClient, workload: Workload) -> None:
        self._user = user
        self._client = client
        self._workload = workload
        self._task: asyncio.Task | None = None
        client.deliver = self._deliver

    def run(self, bridge) -> None:
        """Run the loop until the user stops (gevent thread); raise what ended it other than the stop."""
        ended = False
        try:
            _, error, _, _ = bridge.call(self._main)
            ended = True
        finally:
            if not ended:  # killed while the coroutine runs: end it before the greenlet goes
                if self._client.stop():
                    LoopUser.answered_unreported += 1
                bridge.run(self._end)
            if not LoopUser.running:
                # the process's last user: its results reach Locust's statistics before the runner, which waits for
                # this greenlet, says "stopped" (a web UI poll or a script would read the numbers then)
                gevent.spawn(self._client.results.flush).join()
        if error is not None:
            raise error

    def _deliver(self, exception: BaseException) -> None:
        """A request listener raised ``exception`` (StopUser, RescheduleTask...) for one of this user's requests: it is
        raised in the user's greenlet, as a listener called from the greenlet path raises it there."""
        greenlet = self._user._greenlet
        if greenlet is not None and not greenlet.dead:
            greenlet.kill(exception, block=False)

    def _running(self) -> bool:
        return user_running(self._user) and not self._client.stopping

    async def _main(self) -> None:
        self._task = asyncio.current_task()
        client = self._client
        client.results.register(client)
        LoopUser.running += 1
        try:
            await repeat(client, self._workload(client), self._running)
        finally:
            LoopUser.running -= 1

    async def _end(self) -> None:
        """On the loop: end the user's task, and wait until it has ended. A call on the wire is let finish (up to its
        --etcd-timeout), its answer not reported: a cancelled read-only txn panics etcd 3.5.0-3.5.4 (issue #14110)."""
        task = self._task
        if task is not None and not task.done():
            if self._client.in_call:
                await asyncio.wait({task}, timeout=self._client.settings.timeout)
            if not task.done():
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)
