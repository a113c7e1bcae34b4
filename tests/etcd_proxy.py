#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The network as an adversary: a fault proxy in front of one etcd member.

    etcd_proxy.py UPSTREAM_HOST:PORT PORTFILE [IDLE_SECONDS]

Listens on a free port of 127.0.0.1 (written to PORTFILE once it serves)
and passes HTTP/1.1 requests to the etcd member at UPSTREAM, reply by
reply (a watch's reply streamed as it comes), until it is told to do
otherwise. A request is told by its summary: its path past the gateway
prefix ("kv/txn", "kv/range", "lease/grant", "watch", ...) and, for a
txn, a word per operation with its key decoded from base64: cmp:KEY,
put:KEY, del:KEY, range:KEY (fput:, fdel:, frange: in the failure
branch); for a range, watch, put or delete, range:KEY, watch:KEY, put:KEY,
del:KEY; for a lease call, id:ID. A MATCH is words separated by commas,
each a shell pattern that some word of the summary must match.

The commands, each the body of a POST to /_proxy (never itself faulted),
answered with one line; a rule's command may end with skip=K, which lets
the first K requests it matches pass before it acts:

    hold MATCH [N]        the next N requests that match are held: never
                          passed on, their client left without an answer
                          (it gives up, and may send the request elsewhere)
    release [N]           the held requests (all, or the first N) passed
                          on now, late, each on a connection of its own:
                          "released K" and a word per request, STATUS/SUCCEEDED
                          (a txn's "succeeded", true or false; - for others)
    held                  "held K": how many are held
    wait MATCH [N]        the next N that match wait, their client waiting
                          too, until open; then passed on as usual
    open                  the waiting requests passed on: "opened K"
    waiting               "waiting K": how many wait
    dup MATCH [N] [first] the next N that match passed on twice, one after
                          the other; the client gets the second reply (the
                          first, with "first")
    delay MATCH MS [N]    passed on after MS milliseconds
    cut MATCH [N]         passed on; the client gets half the reply's header
                          lines, and the connection is closed
    drop MATCH [N]        passed on; the client gets nothing, and the
                          connection is closed
    lose MATCH [N]        never passed on; the connection is closed
    fail MATCH [N] [HOW]  held (as hold: release delivers it late), and the
                          client answered at once with an error that leaves
                          the request's fate open, as a member that proposed
                          it and gave up waiting says: HOW "unavailable" (the
                          default: 503, gRPC code 14 "etcdserver: request
                          timed out"), "deadline" (504, code 4 "context
                          deadline exceeded") or "page" (a 502 page without
                          JSON, as a proxy in front of a dying member says)
    endwatch [N]          the next N watches answered at once with an empty
                          200 (a stream that ends as it starts)
    freeze, thaw          nothing passed on, no reply or watch event said,
                          until thaw (a frozen member: it accepts and is
                          silent); what was asked meanwhile goes on at thaw
    clear                 every rule gone, every held request dropped, every
                          waiting one passed on
    stats                 "requests R held H faults F rules K"
    summary MATCH         "yes" or "no": does the last request's summary match
    quit

Every wait is bounded: a client idle for 300 s or a watch silent for
600 s is closed, a reply must start within 60 s, a freeze thaws itself
after 300 s, a held or waiting request is dropped after 600 s, and the
proxy exits once it has served nothing and been told nothing for
IDLE_SECONDS (900) and its member no longer accepts connections.
Python 3 standard library only.
"""

import asyncio
import base64
import fnmatch
import json
import os
import sys
import time

CLIENT_IDLE = 300.0
STREAM_IDLE = 600.0
REPLY_START = 60.0
FREEZE_MAX = 300.0
HOLD_MAX = 600.0
CONNECT = 5.0

upstream_host, upstream_port = None, None
# fail's answers: what a member says of a request it may still apply
FAIL_REPLIES = {
    "unavailable": (503, b"application/json",
                    b'{"error":"etcdserver: request timed out","code":14,"message":"etcdserver: request timed out"}'),
    "deadline": (504, b"application/json",
                 b'{"error":"context deadline exceeded","code":4,"message":"context deadline exceeded"}'),
    "page": (502, b"text/html", b"<html><body><h1>502 Bad Gateway</h1></body></html>\n"),
}
rules = []          # [kind, [patterns], count, extra]
held = []           # [(raw request, time held)]
gates = []          # [asyncio.Event]: a waiting request's, set by open
frozen = None       # asyncio.Event: set while thawed
stats = {"requests": 0, "faults": 0}
last = {"summary": []}
busy = {"conns": 0, "at": time.monotonic(), "quit": False}


def touch():
    busy["at"] = time.monotonic()


def b64text(s):
    try:
        return base64.b64decode(s, validate=True).decode("utf-8", "replace")
    except Exception:
        return "?"


def summarize(path, body):
    """The words a MATCH is matched against."""
    short = path
    for pfx in ("/v3/", "/v3beta/", "/v3alpha/"):
        if path.startswith(pfx):
            short = path[len(pfx):]
            break
    short = short.lstrip("/")
    words = [short]
    try:
        j = json.loads(body) if body else {}
    except ValueError:
        return words
    if not isinstance(j, dict):
        return words
    if short == "kv/txn":
        for c in j.get("compare") or []:
            words.append("cmp:" + b64text(c.get("key", "")))
        for branch, pfx in (("success", ""), ("failure", "f")):
            for op in j.get(branch) or []:
                for kind, word in (("request_put", "put"), ("request_delete_range", "del"),
                                   ("request_range", "range")):
                    if kind in op:
                        words.append(pfx + word + ":" + b64text(op[kind].get("key", "")))
    elif short in ("kv/range", "kv/put", "kv/deleterange"):
        word = {"kv/range": "range", "kv/put": "put", "kv/deleterange": "del"}[short]
        words.append(word + ":" + b64text(j.get("key", "")))
    elif short == "watch":
        cr = j.get("create_request") or {}
        words.append("watch:" + b64text(cr.get("key", "")))
    elif "ID" in j:
        words.append("id:" + str(j.get("ID")))
    return words


def matches(patterns, words):
    return all(any(fnmatch.fnmatchcase(w, p) for w in words) for p in patterns)


def take_rule(words):
    """The first rule the request matches, its count spent: (kind, extra) or
    None (none matches, or the one that does lets it pass: skip=)."""
    for r in rules:
        kind, pats, count, extra, skip = r
        if kind == "endwatch" and words[0] != "watch":
            continue
        if matches(pats, words):
            if skip > 0:
                r[4] -= 1
                return None
            r[2] -= 1
            if r[2] <= 0:
                rules.remove(r)
            stats["faults"] += 1
            return kind, extra
    return None


async def thawed():
    try:
        await asyncio.wait_for(frozen.wait(), FREEZE_MAX)
    except asyncio.TimeoutError:
        frozen.set()  # a freeze nobody thawed ends by itself


# ---- HTTP/1.1, as much as etcd's gateway and libcurl speak ------------------

async def read_head(reader, timeout):
    try:
        return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None


def header(head, name):
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == name:
            return v.strip()
    return None


async def read_request(reader):
    """(raw bytes, path, body), or None at the end of the connection."""
    head = await read_head(reader, CLIENT_IDLE)
    if not head:
        return None
    parts = head.split(b"\r\n", 1)[0].split(b" ")
    if len(parts) < 2:
        return None
    n = int(header(head, b"content-length") or 0)
    body = await asyncio.wait_for(reader.readexactly(n), CLIENT_IDLE) if n else b""
    return head + body, parts[1].decode("latin-1"), body


async def pump_body(reader, head, out, whole_timeout=None):
    """The body of a reply whose head is head, from reader: written to out
    (a callable taking bytes, awaited) piece by piece as it comes, or
    gathered and returned when out is None. A stream may be silent for
    STREAM_IDLE; a whole read gets whole_timeout in all."""
    deadline = None if whole_timeout is None else time.monotonic() + whole_timeout
    got = []

    async def emit(b):
        if out is None:
            got.append(b)
        else:
            await out(b)

    def left():
        if deadline is None:
            return STREAM_IDLE
        return max(0.01, deadline - time.monotonic())

    te = header(head, b"transfer-encoding")
    cl = header(head, b"content-length")
    if te and b"chunked" in te.lower():
        while True:
            line = await asyncio.wait_for(reader.readuntil(b"\r\n"), left())
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                trailer = await asyncio.wait_for(reader.readuntil(b"\r\n"), left())
                while trailer != b"\r\n":
                    trailer = await asyncio.wait_for(reader.readuntil(b"\r\n"), left())
                await emit(line + b"\r\n")
                break
            data = await asyncio.wait_for(reader.readexactly(size + 2), left())
            await emit(line + data)
    elif cl is not None:
        n = int(cl)
        while n > 0:
            data = await asyncio.wait_for(reader.read(min(n, 65536)), left())
            if not data:
                raise ConnectionError("reply cut")
            n -= len(data)
            await emit(data)
    else:
        while True:
            data = await asyncio.wait_for(reader.read(65536), left())
            if not data:
                break
            await emit(data)
    return b"".join(got)


async def connect_upstream():
    return await asyncio.wait_for(asyncio.open_connection(upstream_host, upstream_port), CONNECT)


async def deliver_alone(raw):
    """raw passed on, on a connection of its own, its reply read whole:
    (status, body), or (0, b"") when none came."""
    try:
        ur, uw = await connect_upstream()
    except (OSError, asyncio.TimeoutError):
        return 0, b""
    try:
        uw.write(raw)
        await uw.drain()
        head = await read_head(ur, REPLY_START)
        if not head:
            return 0, b""
        body = await pump_body(ur, head, None, REPLY_START)
        return int(head.split(b" ")[1]), body
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
        return 0, b""
    finally:
        uw.close()


def outcome(status, body):
    try:
        j = json.loads(body)
    except ValueError:
        j = None
    if isinstance(j, dict) and "header" in j and ("responses" in j or "succeeded" in j or status == 200):
        return "%d/%s" % (status, "true" if j.get("succeeded") else "false")
    return "%d/-" % status


# ---- control -----------------------------------------------------------------

async def control(line):
    w = line.split()
    if not w:
        return "error: empty"
    cmd = w[0]
    skip = [int(x[5:]) for x in w[1:] if x.startswith("skip=")]
    skip = skip[0] if skip else 0
    w = [x for x in w if not x.startswith("skip=")]
    try:
        if cmd in ("hold", "cut", "drop", "lose", "wait"):
            rules.append([cmd, w[1].split(","), int(w[2]) if len(w) > 2 else 1, None, skip])
        elif cmd == "fail":
            how = [x for x in w[2:] if not x.isdigit()]
            counts = [x for x in w[2:] if x.isdigit()]
            how = how[0] if how else "unavailable"
            if how not in FAIL_REPLIES:
                return "error: fail how? " + how
            rules.append([cmd, w[1].split(","), int(counts[0]) if counts else 1, how, skip])
        elif cmd == "dup":
            first = "first" in w[2:]
            counts = [x for x in w[2:] if x.isdigit()]
            rules.append([cmd, w[1].split(","), int(counts[0]) if counts else 1, first, skip])
        elif cmd == "delay":
            rules.append([cmd, w[1].split(","), int(w[3]) if len(w) > 3 else 1, int(w[2]) / 1000.0, skip])
        elif cmd == "endwatch":
            rules.append([cmd, ["watch"], int(w[1]) if len(w) > 1 else 1, None, skip])
        elif cmd == "release":
            n = int(w[1]) if len(w) > 1 else len(held)
            out = []
            for _ in range(min(n, len(held))):
                raw, _t = held.pop(0)
                out.append(outcome(*await deliver_alone(raw)))
            return "released %d %s" % (len(out), " ".join(out))
        elif cmd == "open":
            n = len(gates)
            for g in gates:
                g.set()
            gates.clear()
            return "opened %d" % n
        elif cmd == "waiting":
            return "waiting %d" % len(gates)
        elif cmd == "held":
            return "held %d" % len(held)
        elif cmd == "freeze":
            frozen.clear()
        elif cmd == "thaw":
            frozen.set()
        elif cmd == "clear":
            rules.clear()
            held.clear()
            for g in gates:
                g.set()
            gates.clear()
        elif cmd == "stats":
            return "requests %d held %d faults %d rules %d" % (stats["requests"], len(held), stats["faults"],
                                                                len(rules))
        elif cmd == "summary":
            return "yes" if matches(w[1].split(","), last["summary"] or [""]) else "no"
        elif cmd == "quit":
            busy["quit"] = True
        else:
            return "error: unknown command " + cmd
    except (IndexError, ValueError) as e:
        return "error: " + str(e)
    return "ok"


# ---- a client's connection -----------------------------------------------------

async def until_closed(reader, timeout):
    """Waits (bounded) until the client closes its end."""
    try:
        while await asyncio.wait_for(reader.read(65536), timeout):
            pass
    except (asyncio.TimeoutError, ConnectionError):
        pass


async def relay(raw, kind, extra, cr, cw, up):
    """One request passed on through up (a [reader, writer] pair, opened here
    when None) and its reply to the client: False once the connection is
    to be closed."""
    if up[0] is None:
        try:
            up[0], up[1] = await connect_upstream()
        except (OSError, asyncio.TimeoutError):
            return False
    ur, uw = up
    first = None
    if kind == "dup":
        first = await deliver_alone(raw)
    uw.write(raw)
    await uw.drain()
    head = await read_head(ur, REPLY_START)
    if not head:
        return False
    if kind in ("cut", "drop"):
        await pump_body(ur, head, None, REPLY_START)  # applied whole, and its answer lost
        if kind == "cut":
            lines = head.split(b"\r\n")
            cw.write(b"\r\n".join(lines[:max(1, (len(lines) - 2) // 2)]) + b"\r\n")
            await cw.drain()
        return False
    if kind == "dup" and extra and first[0]:
        await pump_body(ur, head, None, REPLY_START)
        status, body = first
        cw.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" %
                 (status, len(body)) + body)
        await cw.drain()
        return True

    async def out(b):
        await thawed()
        cw.write(b)
        await cw.drain()
        touch()

    await thawed()
    cw.write(head)
    await cw.drain()
    # A stream (a watch) ends when either side closes: the client's end is
    # watched beside it.
    pump = asyncio.ensure_future(pump_body(ur, head, out))
    gone = asyncio.ensure_future(until_closed(cr, STREAM_IDLE)) if raw.startswith(b"POST /v3") and \
        b"/watch " in raw.split(b"\r\n", 1)[0] else None
    waits = [pump] + ([gone] if gone else [])
    done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for p in pending:
        p.cancel()
    if gone in done or pump.exception() is not None:
        return False
    return gone is None


async def serve(cr, cw):
    busy["conns"] += 1
    touch()
    up = [None, None]
    try:
        while True:
            req = await read_request(cr)
            touch()
            if req is None:
                return
            raw, path, body = req
            if raw.startswith(b"PRI * HTTP/2.0\r\n"):
                # The adapter's gRPC, tried first: this proxy speaks HTTP/1.1
                # only, and refuses it as such a server does (neither counted
                # nor matched against a rule); the adapter takes the gateway.
                cw.write(b"HTTP/1.1 505 HTTP Version Not Supported\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                await cw.drain()
                cw.write_eof()  # closed once the client has gone: unread frames would reset it
                await until_closed(cr, 2)
                return
            if path.startswith("/_proxy"):
                reply = (await control(body.decode("utf-8", "replace"))).encode() + b"\n"
                cw.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % len(reply)
                         + reply)
                await cw.drain()
                continue
            stats["requests"] += 1
            words = summarize(path, body)
            last["summary"] = words
            await thawed()
            rule = take_rule(words)
            kind, extra = rule if rule else (None, None)
            if kind == "hold":
                held.append((raw, time.monotonic()))
                await until_closed(cr, HOLD_MAX)
                return
            if kind == "lose":
                return
            if kind == "fail":
                held.append((raw, time.monotonic()))
                status, ctype, reply = FAIL_REPLIES[extra]
                cw.write(b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n" %
                         (status, ctype, len(reply)) + reply)
                await cw.drain()
                continue
            if kind == "endwatch":
                cw.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n")
                await cw.drain()
                continue
            if kind == "delay":
                await asyncio.sleep(extra)
            if kind == "wait":
                gate = asyncio.Event()
                gates.append(gate)
                try:
                    await asyncio.wait_for(gate.wait(), HOLD_MAX)
                except asyncio.TimeoutError:
                    return
            if not await relay(raw, kind, extra, cr, cw, up):
                return
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
        return
    finally:
        busy["conns"] -= 1
        touch()
        for w in (cw, up[1]):
            if w is not None:
                try:
                    w.close()
                except OSError:
                    pass


async def upstream_up():
    """Does the member behind the proxy accept a connection (2 s at most)?"""
    try:
        _, w = await asyncio.wait_for(asyncio.open_connection(upstream_host, upstream_port), 2)
    except (OSError, asyncio.TimeoutError):
        return False
    w.close()
    return True


async def main():
    global upstream_host, upstream_port, frozen
    if len(sys.argv) < 3:
        sys.stderr.write("usage: etcd_proxy.py UPSTREAM_HOST:PORT PORTFILE [IDLE_SECONDS]\n")
        sys.exit(2)
    host, _, port = sys.argv[1].rpartition(":")
    upstream_host, upstream_port = host or "127.0.0.1", int(port)
    idle = float(sys.argv[3]) if len(sys.argv) > 3 else 900.0
    frozen = asyncio.Event()
    frozen.set()
    server = await asyncio.start_server(serve, "127.0.0.1", 0, limit=1 << 20)
    port = server.sockets[0].getsockname()[1]
    tmp = sys.argv[2] + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.rename(tmp, sys.argv[2])
    while True:
        await asyncio.sleep(0.2 if busy["quit"] else 2)
        if busy["quit"]:
            return
        now = time.monotonic()
        while held and now - held[0][1] > HOLD_MAX:
            held.pop(0)
        if busy["conns"] == 0 and now - busy["at"] > idle:
            # Idle, but a member still up is a cluster still in use (a suite
            # slowed by its load reaches the proxy's tests later than 900 s
            # after the start): only a proxy whose member is gone leaves.
            if not await upstream_up():
                return
            busy["at"] = now


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
