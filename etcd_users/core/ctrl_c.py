"""Ctrl-C as Locust expects it: KeyboardInterrupt in its main greenlet, which shuts the run down cleanly.

Python raises KeyboardInterrupt in whatever code runs when SIGINT arrives; with busy users that is a user's greenlet,
which dies with a traceback while the run ends without its summary.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import signal

import gevent


def interrupt_main_greenlet_on_ctrl_c(main) -> None:
    """SIGINT throws KeyboardInterrupt into ``main`` (Locust's main greenlet) while it lives."""

    def interrupt() -> None:
        if not main.dead:
            main.throw(KeyboardInterrupt)

    gevent.signal_handler(signal.SIGINT, interrupt)
