"""Keys and values: fixed sizes, a bounded key space under the prefix, random or sequential order."""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Iterator

from etcd_users.settings import EtcdSettings


def prefix_range_end(prefix: bytes) -> bytes:
    """The range_end that covers exactly the keys starting with ``prefix`` (etcd's ``--prefix``)."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"


class KeySpace:
    """``--etcd-key-space-size`` keys of exactly ``--etcd-key-size`` bytes: the prefix, then a zero-padded counter."""

    def __init__(self, settings: EtcdSettings) -> None:
        self.prefix = settings.prefix
        self.size = settings.key_space_size
        self.width = settings.key_width
        self.value = os.urandom(settings.val_size)
        self.range_end = prefix_range_end(self.prefix)
        self._sequence = itertools.cycle(range(self.size)).__next__ if settings.sequential_keys else None
        generator = random.Random()
        self._random = generator.random  # int(random() * size): uniform to 2**-53, at half the cost of randrange
        self._sample = generator.sample

    def key(self, index: int) -> bytes:
        return self.prefix + b"%0*d" % (self.width, index)

    def next_key(self) -> bytes:
        index = self._sequence() if self._sequence is not None else int(self._random() * self.size)
        return self.prefix + b"%0*d" % (self.width, index)

    def distinct_keys(self, count: int) -> list[bytes]:
        """``count`` different keys (a transaction may not name a key twice)."""
        if self._sequence is not None:
            return [self.next_key() for _ in range(count)]  # distinct as long as count <= size
        return [self.key(index) for index in self._sample(range(self.size), count)]

    def all_keys(self) -> Iterator[bytes]:
        return (self.key(index) for index in range(self.size))

    def first_and_end(self) -> tuple[bytes, bytes]:
        """The [key, range_end) interval that holds exactly the key space."""
        return self.key(0), self.key(self.size - 1) + b"\0"
