"""Keys and values: fixed sizes, a bounded key space under the prefix, keys drawn by ``--etcd-key-distribution``."""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Callable, Iterator

from etcd_users.workload_model.distributions import reader, scramble, zipfian_ranks


def prefix_range_end(prefix: bytes) -> bytes:
    """The range_end that covers exactly the keys starting with ``prefix`` (etcd's ``--prefix``)."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"


def next_page_key(last_key: bytes) -> bytes:
    """Where the next page of a paged list starts: the smallest key after the last one returned (kube-apiserver's
    continue token holds the same)."""
    return last_key + b"\0"


_KEPT_RANKS = 65536  # zipfian keys kept per key space: the hottest, at most 16 MiB of 256-byte keys


class KeySpace:
    """``--etcd-key-space-size`` keys of exactly ``--etcd-key-size`` bytes: the prefix, then a zero-padded counter.

    ``next_key`` draws the key of a read (or of any request that does not write a new key) and ``next_write_key`` the
    key of a write; they differ only for "latest", whose writes walk the key space in order (YCSB's inserts) and whose
    reads draw back from the newest key written. Both are closures set per key space: one call per request.
    """

    def __init__(self, settings) -> None:  # the run's EtcdSettings (not imported: the settings import this package)
        self.prefix = prefix = settings.prefix
        self.size = size = settings.key_space_size
        self.width = width = settings.key_width
        self.value = os.urandom(settings.val_size)
        self.range_end = prefix_range_end(self.prefix)
        self.distribution = settings.distribution
        generator = random.Random()
        self._sample = generator.sample
        # the newest key of "latest": the key space is written in order before the reads, so the last key first
        self._newest = size - 1
        self._inserts = itertools.count(size).__next__
        self.next_index = reader(self.distribution, size, generator, self._newest_index)
        next_index = self.next_index
        if self.distribution.kind == "uniform":  # the default, inlined: one call per key, as before distributions
            uniform = generator.random
            self.next_key = lambda: prefix + b"%0*d" % (width, int(uniform() * size))
        elif self.distribution.kind == "zipfian":
            self.next_key = self._zipfian_keys(generator)
        else:
            self.next_key = lambda: prefix + b"%0*d" % (width, next_index())
        if self.distribution.kind == "latest":
            inserts = itertools.count(size).__next__

            def next_write_key() -> bytes:
                self._newest = newest = inserts() % size
                return prefix + b"%0*d" % (width, newest)

            self.next_write_key = next_write_key
        else:
            self.next_write_key = self.next_key

    def _zipfian_keys(self, generator: random.Random) -> Callable[[], bytes]:
        """Zipfian keys, the hottest ranks' keys kept once made: a skewed draw mostly repeats them."""
        rank, scrambled = zipfian_ranks(self.size, self.distribution.theta, generator.random), scramble(self.size)
        prefix, width = self.prefix, self.width
        made: dict[int, bytes] = {}
        get = made.get

        def next_key() -> bytes:
            drawn = rank()
            key = get(drawn)
            if key is None:
                key = prefix + b"%0*d" % (width, scrambled(drawn))
                if drawn < _KEPT_RANKS:
                    made[drawn] = key
            return key

        return next_key

    def _newest_index(self) -> int:
        return self._newest

    def new_index(self) -> int:
        """The index of a new key past the loaded ones (YCSB's insert): the key space grows from ``size`` on."""
        return self._inserts()

    def inserted(self, index: int) -> None:
        """A new key is written: "latest" reads and scans reach it from now on (YCSB's acknowledged inserts)."""
        if index > self._newest:
            self._newest = index

    def scan_of(self, count: int) -> tuple[bytes, bytes]:
        """[key, range_end) of ``count`` consecutive keys from a drawn one, inserted keys included, moved back to end
        at the newest key written."""
        first = max(0, min(self.next_index(), self._newest - count + 1))
        return self.key(first), self.key(first + count - 1) + b"\0"

    def key(self, index: int) -> bytes:
        """The key of ``index``: the prefix, then the index zero-padded to ``--etcd-key-size`` bytes in all."""
        return self.prefix + b"%0*d" % (self.width, index)

    def distinct_keys(self, count: int, *, write: bool = False) -> list[bytes]:
        """``count`` different keys (a transaction may not name a key twice), drawn as the distribution says."""
        kind = self.distribution.kind
        if kind == "uniform":
            return [self.key(index) for index in self._sample(range(self.size), count)]
        draw = self.next_write_key if write else self.next_key
        if kind == "sequential" or (write and kind == "latest"):
            return [draw() for _ in range(count)]  # distinct as long as count <= size
        keys = dict.fromkeys(draw() for _ in range(count))
        for _ in range(count * 20):  # a skewed draw repeats its hottest keys: draw on, then fill in at random
            if len(keys) >= count:
                break
            keys[draw()] = None
        for index in self._sample(range(self.size), count):
            if len(keys) >= count:
                break
            keys[self.key(index)] = None
        return list(keys)[:count]

    def range_of(self, count: int) -> tuple[bytes, bytes]:
        """[key, range_end) of ``count`` consecutive keys from a drawn one, moved back to end inside the key space."""
        first = min(self.next_index(), self.size - count)
        return self.key(first), self.key(first + count - 1) + b"\0"

    def all_keys(self) -> Iterator[bytes]:
        return (self.key(index) for index in range(self.size))

    def first_and_end(self) -> tuple[bytes, bytes]:
        """The [key, range_end) interval that holds exactly the key space."""
        return self.key(0), self.key(self.size - 1) + b"\0"
