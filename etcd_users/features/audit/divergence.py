"""The keys the members hold differently, when their HashKV differ or their revisions diverged: each member's keys
under the tool's prefix, read from that member alone (serializable, keys only, in pages at one revision), compared by
presence and version. A version counts a key's puts since its creation, so a put one member skipped shows on its own
key, where the mod revisions of every later key would only say the member's revisions are shifted.

HashKV hashes every key of a member; this reads the tool's prefix only, where the tool's writes are.
``differing_keys`` is pure.
"""

from __future__ import annotations

import asyncio

from etcd3.etcdrpc import rpc_pb2

from etcd_users.transport.errors import error_label
from etcd_users.transport.pool import EndpointPool
from etcd_users.workload_model.keys import prefix_range_end

DIFFERING_KEYS_KEPT = 100  # the keys kept whole in the evidence; the rest are counted
PAGE_KEYS = 10_000
LISTING_TIMEOUT_S = 30.0  # one page of one member

Listing = dict[bytes, tuple[int, int]]  # key -> (version, mod revision)


async def member_listing(connection, prefix: bytes, page: int = PAGE_KEYS) -> Listing | str:
    """Every key under ``prefix`` on the member behind ``connection`` alone, at the revision of its first page; etcd's
    error (by its label) when it refuses."""
    start, end, revision = prefix, prefix_range_end(prefix), 0
    listing: Listing = {}
    try:
        while True:
            request = rpc_pb2.RangeRequest(
                key=start, range_end=end, keys_only=True, serializable=True, limit=page, revision=revision
            )
            response = await connection.kv.Range(request, timeout=LISTING_TIMEOUT_S, metadata=connection.metadata)
            revision = revision or response.header.revision  # every page at the first one's revision
            for kv in response.kvs:
                listing[kv.key] = (kv.version, kv.mod_revision)
            if not response.more or not response.kvs:
                return listing
            start = response.kvs[-1].key + b"\0"
    except Exception as error:  # whatever the member says is the evidence, under etcd's or gRPC's label
        return error_label(error)


def differing_keys(listings: dict[str, Listing | str]) -> tuple[list[dict], int]:
    """The first ``DIFFERING_KEYS_KEPT`` keys that the members who answered hold with another version or not at all,
    each ``{key, members: {url: {version, mod_revision} or None}}`` in key order, and how many there are in all."""
    answered = {url: listing for url, listing in listings.items() if not isinstance(listing, str)}
    if len(answered) < 2:
        return [], 0
    keys = sorted(set().union(*answered.values()))
    kept: list[dict] = []
    differing = 0
    for key in keys:
        held = {url: listing.get(key) for url, listing in answered.items()}
        if len({entry[0] if entry is not None else None for entry in held.values()}) == 1:
            continue
        differing += 1
        if len(kept) < DIFFERING_KEYS_KEPT:
            members = {
                url: None if entry is None else {"version": entry[0], "mod_revision": entry[1]}
                for url, entry in held.items()
            }
            kept.append({"key": key.decode(errors="replace"), "members": members})
    return kept, differing


async def keys_held_differently(pool: EndpointPool, prefix: bytes) -> dict:
    """Each member's listing of ``prefix`` (``--etcd-prefix`` as the settings hold it) compared: how many keys each
    holds (or its error), the keys that differ."""
    members = [
        (endpoint.url, pool.connections[endpoint][0]) for endpoint in pool.endpoints if pool.connections.get(endpoint)
    ]
    answers = await asyncio.gather(*(member_listing(connection, prefix) for _, connection in members))
    listings = {url: answer for (url, _), answer in zip(members, answers, strict=True)}
    keys, differing = differing_keys(listings)
    held = {url: listing if isinstance(listing, str) else len(listing) for url, listing in listings.items()}
    return {"prefix": prefix.decode(errors="replace"), "keys_held": held, "differing": differing, "keys": keys}
