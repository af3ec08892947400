"""The offending keys of a failed audit, beside what every member holds of each: ``PREFIX_evidence.json``, and
``PREFIX_evidence.html``, a timeline per key in revision order.

For each key lost (``ledger.KeyCounts.lost_keys``) and each linearizable read that did not see a write acknowledged
before it was sent (``reads.ReadCounts.evidence``): the write etcd acknowledged to the tool, what the tool read, and
each member's own answer (a serializable read of the member alone) for the key now and at the acknowledged write's
revision, while etcd still keeps that history, and the key's events on each member from that write on (a watch from
its revision: who deleted or rewrote the key, and when). A member that answers otherwise than the others is the one
to look at.
"""

from __future__ import annotations

import asyncio
import html
import json

import grpc
from etcd3.etcdrpc import kv_pb2, rpc_pb2

from etcd_users.features.audit.verdict import keys_held_text
from etcd_users.files import SUFFIXES
from etcd_users.transport.errors import error_label
from etcd_users.transport.pool import EndpointPool

HISTORY_TIMEOUT_S = 5.0  # each member's answer for one key
# a key's events from a past revision come at once; a watch quiet this long after its last response has sent them all
HISTORY_IDLE_S = 0.5


def offending_keys(lost: list[dict], violations: list[dict]) -> list[tuple[str, int]]:
    """(key, revision of the write the tool knew of) of each key to look at, each once, in the order found."""
    seen: dict[str, int] = {}
    for item in lost:
        seen.setdefault(item["key"], item["acknowledged_revision"])
    for item in violations:
        seen.setdefault(item["key"], item["write_revision"])
    return list(seen.items())


async def members_view(pool: EndpointPool, keys: list[tuple[str, int]]) -> dict[str, dict[str, dict]]:
    """key -> member URL -> its answer now (``now``) and at the write's revision (``at_write``): a version of the key
    (mod, create revision, version), ``absent``, or etcd's error (a compacted revision); and its events from the
    write's revision on (``history``)."""
    members = [
        (endpoint.url, pool.connections[endpoint][0]) for endpoint in pool.endpoints if pool.connections.get(endpoint)
    ]
    asked = [
        (key, url, when, at)
        for key, revision in keys
        for url, _ in members
        for when, at in (("now", 0), ("at_write", revision))
    ]
    connections = dict(members)
    # all at once: a member that does not answer costs HISTORY_TIMEOUT_S in all, not per key
    answers = await asyncio.gather(
        *(_answer(connections[url], key.encode(), at) for key, url, _, at in asked),
        *(_history(connection, key.encode(), revision) for key, revision in keys for _, connection in members),
    )
    view: dict[str, dict[str, dict]] = {key: {url: {} for url, _ in members} for key, _ in keys}
    for (key, url, when, _), answer in zip(asked, answers[: len(asked)], strict=True):
        view[key][url][when] = answer
    histories = iter(answers[len(asked) :])
    for key, _ in keys:
        for url, _ in members:
            view[key][url]["history"] = next(histories)
    return view


async def _history(connection, key: bytes, start: int) -> dict:
    """The key's events on one member from revision ``start`` on, each ``{revision, type, version}``; from where etcd's
    compaction left its history (``compacted_at``) when ``start`` is gone; etcd's error otherwise."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HISTORY_TIMEOUT_S
    events: list[dict] = []
    found: dict = {}
    for _ in range(2):  # once more from the compaction's revision, when etcd refuses ``start`` for it
        call = connection.watch.Watch(metadata=connection.metadata)
        again = False
        try:
            create = rpc_pb2.WatchCreateRequest(key=key, start_revision=start)
            await call.write(rpc_pb2.WatchRequest(create_request=create))
            while (left := min(HISTORY_IDLE_S, deadline - loop.time())) > 0:
                try:
                    response = await asyncio.wait_for(call.read(), left)
                except TimeoutError:
                    break
                if response is grpc.aio.EOF:
                    break
                if response.canceled and response.compact_revision:
                    found["compacted_at"] = start = response.compact_revision
                    again = True
                    break
                if response.canceled:
                    return {**found, "error": response.cancel_reason or "canceled"}
                events += [
                    {
                        "revision": event.kv.mod_revision,
                        "type": "delete" if event.type == kv_pb2.Event.DELETE else "put",
                        "version": event.kv.version,
                    }
                    for event in response.events
                ]
        except Exception as error:  # whatever the member says is the evidence, under etcd's or gRPC's label
            return {**found, "error": error_label(error)}
        finally:
            call.cancel()
        if not again:
            break
    return {**found, "events": events}


async def _answer(connection, key: bytes, revision: int) -> dict | str:
    request = rpc_pb2.RangeRequest(key=key, serializable=True, revision=revision)
    try:
        response = await connection.kv.Range(request, timeout=HISTORY_TIMEOUT_S, metadata=connection.metadata)
    except Exception as error:  # whatever the member says is the evidence, under etcd's or gRPC's label
        return {"error": error_label(error)}
    if not response.kvs:
        return {"absent": True, "member_revision": response.header.revision}
    kv = response.kvs[0]
    return {
        "mod_revision": kv.mod_revision,
        "create_revision": kv.create_revision,
        "version": kv.version,
        "member_revision": response.header.revision,
    }


def document(
    lost: list[dict], violations: list[dict], view: dict[str, dict[str, dict]], held: dict | None = None
) -> dict:
    """The evidence file: each lost key and each violation, with every member's view of its key; with members whose
    data differ, the keys they hold differently (``audit.divergence``)."""
    return {
        "lost": [{**item, "members": view.get(item["key"], {})} for item in lost],
        "linearizability": [{**item, "members": view.get(item["key"], {})} for item in violations],
        **({"held_differently": held} if held is not None else {}),
    }


def write(prefix: str, evidence: dict) -> list[str]:
    """``PREFIX_evidence.json`` and ``PREFIX_evidence.html``; their paths."""
    paths = [prefix + SUFFIXES["evidence"], prefix + SUFFIXES["evidence_html"]]
    with open(paths[0], "w", encoding="utf-8") as out:
        json.dump(evidence, out, indent=2)
        out.write("\n")
    with open(paths[1], "w", encoding="utf-8") as out:
        out.write(timeline(evidence))
    return paths


def _version(answer: dict) -> str:
    if "error" in answer:
        return f"error: {answer['error']}"
    if answer.get("absent"):
        return f"absent (member at rev {answer['member_revision']})"
    return (
        f"mod rev {answer['mod_revision']}, created at rev {answer['create_revision']}, version {answer['version']} "
        f"(member at rev {answer['member_revision']})"
    )


def _rows(item: dict, lost: bool) -> list[tuple[int, str, str]]:
    """(revision, who, what) of one key, in revision order."""
    if lost:
        written = item["acknowledged_revision"]
        found = item["found_mod_revision"]
        read = "absent" if found is None else f"mod rev {found}"
        rows = [
            (written, "the tool", f"{item['acknowledged']} acknowledged at rev {written}"),
            (item["read_revision"], "the read back", f"{read}: judged {item['judged']}"),
        ]
    else:
        written = item["write_revision"]
        rows = [
            (written, "the tool", f"write acknowledged at rev {written}"),
            (
                item["read_revision"],
                item["member"],
                f"{item['name']} read at rev {item['read_revision']}: {item['reason']}",
            ),
        ]
    members = item["members"]
    for url, answers in sorted(members.items()):
        rows.append((written, url, f"at rev {written}: {_version(answers['at_write'])}"))
        now = answers["now"]
        rows.append((now.get("member_revision", written), url, f"now: {_version(now)}"))
        history = answers.get("history") or {}
        compacted = history.get("compacted_at")
        if compacted is not None:
            rows.append((compacted, url, f"history compacted: its events from rev {compacted}"))
        if "error" in history:
            rows.append((written, url, f"history: error: {history['error']}"))
    rows += _events(members)
    return sorted(rows, key=lambda row: row[0])


def _events(members: dict[str, dict]) -> list[tuple[int, str, str]]:
    """Each event of the key in the members' histories, once, with the members that have it (all, or which)."""
    holders: dict[tuple[int, str, int], list[str]] = {}
    answered = [url for url, answers in members.items() if "events" in (answers.get("history") or {})]
    for url in answered:
        for event in members[url]["history"]["events"]:
            holders.setdefault((event["revision"], event["type"], event["version"]), []).append(url)
    rows = []
    for (revision, kind, version), urls in holders.items():
        who = "every member" if len(urls) == len(answered) > 1 else ", ".join(sorted(urls))
        what = "deleted" if kind == "delete" else f"put, version {version}"
        rows.append((revision, who, f"{what} at rev {revision}"))
    return rows


def timeline(evidence: dict) -> str:
    """A page with a table per key: the tool's write, its read, and each member's answers, in revision order."""
    parts = [
        "<!doctype html><meta charset='utf-8'><title>audit evidence</title>",
        "<style>body{font-family:sans-serif}table{border-collapse:collapse;margin-bottom:1.5em}"
        "td,th{border:1px solid #bbb;padding:2px 8px;text-align:left}</style>",
        "<h1>The audit's offending keys</h1>",
    ]
    parts += _held_differently(evidence.get("held_differently"))
    for section, title, lost in (
        ("lost", "Acknowledged writes lost", True),
        ("linearizability", "Stale linearizable reads", False),
    ):
        items = evidence.get(section) or []
        if not items:
            continue
        parts.append(f"<h2>{title} ({len(items)})</h2>")
        for item in items:
            parts.append(f"<h3>{html.escape(item['key'])}</h3><table><tr><th>rev</th><th>who</th><th>what</th></tr>")
            for revision, who, what in _rows(item, lost):
                parts.append(f"<tr><td>{revision}</td><td>{html.escape(who)}</td><td>{html.escape(what)}</td></tr>")
            parts.append("</table>")
    return "\n".join(parts) + "\n"


def _held_differently(held: dict | None) -> list[str]:
    """A table of the keys the members hold differently: a column per member, its version and mod revision of each."""
    if not held:
        return []
    urls = list(held["keys_held"])
    counts = keys_held_text(held["keys_held"])
    parts = [
        f"<h2>Keys the members hold differently ({held['differing']:,})</h2>",
        f"<p>under {html.escape(held['prefix'])}: {html.escape(counts)}</p>",
        "<table><tr><th>key</th>" + "".join(f"<th>{html.escape(url)}</th>" for url in urls) + "</tr>",
    ]
    for item in held["keys"]:
        cells = []
        for url in urls:
            entry = item["members"].get(url, "no answer")
            if isinstance(entry, dict):
                entry = f"version {entry['version']}, mod rev {entry['mod_revision']}"
            cells.append(f"<td>{html.escape(entry or 'absent')}</td>")
        parts.append(f"<tr><td>{html.escape(item['key'])}</td>{''.join(cells)}</tr>")
    parts.append("</table>")
    if held["differing"] > len(held["keys"]):
        parts.append(f"<p>and {held['differing'] - len(held['keys']):,} more keys (the first kept)</p>")
    return parts
