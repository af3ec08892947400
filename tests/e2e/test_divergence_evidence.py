"""The keys members hold differently, read from real members: the three members of one cluster agree; a member of
another cluster, written otherwise under the same prefix, stands for a member whose data diverged (a real divergence
cannot be made at will), and the comparison finds exactly the keys planted."""

from __future__ import annotations

import argparse
import urllib.parse

import etcd3
import pytest

from etcd_users.core.features import OPTIONS
from etcd_users.features.audit.divergence import differing_keys, keys_held_differently, member_listing
from etcd_users.settings import settings_from_options
from etcd_users.transport.bridge import Bridge
from etcd_users.transport.pool import EndpointPool

pytestmark = pytest.mark.e2e

PREFIX = "/divergence-evidence/"


def client_of(endpoint: str) -> etcd3.Etcd3Client:
    address = urllib.parse.urlsplit(endpoint)
    return etcd3.client(address.hostname, address.port, timeout=10)


def pool_of(endpoints: list[str]) -> EndpointPool:
    namespace = argparse.Namespace(**{option.dest: option.default for option in OPTIONS})
    namespace.etcd_endpoints, namespace.etcd_target, namespace.etcd_prefix = ",".join(endpoints), "round-robin", PREFIX
    return EndpointPool(settings_from_options(namespace))


def test_the_keys_one_member_holds_otherwise_are_found_by_presence_and_version(etcd1, etcd3):
    three, one = client_of(etcd3.endpoints[0]), client_of(etcd1.endpoints[0])
    try:
        for client in (three, one):
            client.delete_prefix(PREFIX)
            for index in range(25):  # more than a page of 10: the listing reads in pages
                client.put(f"{PREFIX}{index:02d}", "v")
        three.put(f"{PREFIX}07", "again")  # version 2 here, 1 there
        one.delete(f"{PREFIX}11")  # absent there
        one.put(f"{PREFIX}99", "only there")
        bridge = Bridge()
        pool = pool_of([*etcd3.endpoints, etcd1.endpoints[0]])
        try:
            bridge.run(pool.open)
            members = [(endpoint.url, pool.connections[endpoint][0]) for endpoint in pool.endpoints]

            async def listings() -> dict:
                return {url: await member_listing(connection, PREFIX.encode(), page=10) for url, connection in members}

            listed = bridge.run(listings)
            held = bridge.run(lambda: keys_held_differently(pool, pool.settings.prefix))
            bridge.run(pool.close)
        finally:
            bridge.close()
    finally:
        for client in (three, one):
            client.delete_prefix(PREFIX)
            client.close()
    # the three members of one cluster hold the same keys and versions: nothing differs among them
    assert differing_keys({url: listed[url] for url in etcd3.endpoints}) == ([], 0)
    assert {len(listed[url]) for url in etcd3.endpoints} == {25}
    # the other cluster's member differs on exactly the keys planted, whatever their mod revisions
    keys, differing = differing_keys(listed)
    assert differing == 3 and [item["key"] for item in keys] == [f"{PREFIX}07", f"{PREFIX}11", f"{PREFIX}99"]
    other = etcd1.endpoints[0]
    assert keys[0]["members"][other]["version"] == 1 and keys[0]["members"][etcd3.endpoints[0]]["version"] == 2
    assert keys[1]["members"][other] is None and keys[2]["members"][etcd3.endpoints[0]] is None
    assert held["prefix"] == PREFIX and held["differing"] == 3
    assert held["keys_held"] == {**dict.fromkeys(etcd3.endpoints, 25), other: 25}
