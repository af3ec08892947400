"""How skewed a run's writes were, counted from etcd rather than from the options: the master (or single process)
reads the prefix's keys' versions (how many puts each key took since it was created) when the run starts and when
it stops, and writes the puts per key between the two into ``PREFIX_skew.json``, with the share of them that went to
the hottest 1 % of the key space. The request path counts nothing; the two reads are bounded (``MAX_KEYS``) and
happen outside the measured requests.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import json
import logging
import math
import os

from etcd3.etcdrpc import rpc_pb2

from etcd_users.core.feature_hooks import FeatureHooks
from etcd_users.core.run_context import run_context
from etcd_users.files import SUFFIXES
from etcd_users.transport.errors import error_detail
from etcd_users.transport.pool import EndpointPool
from etcd_users.transport.probe import with_probe
from etcd_users.workload_model.distributions import HOTTEST_SHARE, counted_hottest_share, writes_per_key
from etcd_users.workload_model.keys import prefix_range_end

logger = logging.getLogger("etcd_users.reporting.key_skew")  # the name users' log filters know
_console = logging.getLogger("locust.stats_logger")  # where Locust prints its summary

MAX_KEYS = 200_000  # more keys under the prefix than this: not counted (two reads of them would take seconds)
PAGE_KEYS = 5000


class TooManyKeys(Exception):
    pass


class KeySkew(FeatureHooks):
    def __init__(self, tool) -> None:
        super().__init__(tool)
        self.before: dict[bytes, int] | None = None
        self.note = ""  # why the run's writes were not counted

    def on_test_start(self, environment, **_kwargs) -> None:
        self.before, self.note = None, ""
        if self._counting(environment):
            self.before = self._versions()

    def on_test_stop(self, environment, **_kwargs) -> None:
        if self.before is None or not self._counting(environment):
            if self.note:
                logger.info("keys' writes not counted: %s", self.note)
            return
        after = self._versions()
        before, self.before = self.before, None
        if after is None:
            logger.info("keys' writes not counted: %s", self.note)
            return
        settings = self.tool.run_settings
        writes = writes_per_key(before, after)
        share = counted_hottest_share(writes, settings.key_space_size)
        if share is None:
            return  # a run that put nothing under the prefix
        counted = {
            "distribution": str(settings.distribution),
            "key_space_size": settings.key_space_size,
            "hottest_keys": max(1, math.ceil(settings.key_space_size * HOTTEST_SHARE)),
            "keys_written": len(writes),
            "writes": sum(writes),
            "hottest_share": share,
            "theoretical_share": settings.distribution.hottest_share(settings.key_space_size),
        }
        _console.info("%s", skew_line(counted))
        _write_json(environment.parsed_options.csv_prefix + SUFFIXES["skew"], counted)

    def _counting(self, environment) -> bool:
        """Only where the run's files are written: a master or single process run with ``--csv``."""
        return (
            run_context(environment).role.judges
            and bool(getattr(environment.parsed_options, "csv_prefix", None))
            and self.tool.run_settings is not None
        )

    def _versions(self) -> dict[bytes, int] | None:
        settings = self.tool.run_settings
        try:
            return with_probe(settings, lambda pool: read_versions(pool, settings.prefix))
        except TooManyKeys:
            self.note = f"more than {MAX_KEYS} keys under the prefix"
        except Exception as error:  # the members may be gone (a fault test): a note, never a traceback
            self.note = error_detail(error)
        return None


def skew_line(counted: dict) -> str:
    """``key skew: 4000 puts by etcd's count to 640 keys, 39.8% of them to the hottest 1% (10 keys) of the 1000; …``

    etcd's count is not Locust's: it is the keys' versions, so it takes every client's puts under the prefix and a
    put that failed after etcd applied it, and leaves out a key's puts before a delete."""
    return (
        f"key skew: {counted['writes']} puts by etcd's count (the keys' versions, not Locust's requests) to "
        f"{counted['keys_written']} keys, {100.0 * counted['hottest_share']:.1f}% of them to the hottest 1% "
        f"({counted['hottest_keys']} keys) of the {counted['key_space_size']}; drawn {counted['distribution']}, in "
        f"theory {100.0 * counted['theoretical_share']:.1f}%"
    )


async def read_versions(pool: EndpointPool, prefix: bytes) -> dict[bytes, int]:
    """Each key under ``prefix`` and its version, at one revision, in pages of keys only."""
    end = prefix_range_end(prefix)
    key, revision, found = prefix, 0, {}
    while True:
        connection = pool.next_connection()
        page = await connection.kv.Range(
            rpc_pb2.RangeRequest(key=key, range_end=end, revision=revision, limit=PAGE_KEYS, keys_only=True),
            timeout=pool.settings.timeout,
            metadata=connection.metadata,
        )
        revision = page.header.revision
        for kv in page.kvs:
            found[kv.key] = kv.version
        if len(found) > MAX_KEYS:
            raise TooManyKeys
        if not page.more or not page.kvs:
            return found
        key = page.kvs[-1].key + b"\0"


def _write_json(path: str, data: dict) -> None:
    try:
        with open(path, "w") as file:
            json.dump(data, file, indent=2)
    except OSError as error:
        logger.error("locust-etcd: error: could not write %s: %s", path, os.strerror(error.errno or 0))
