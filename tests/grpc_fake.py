# SPDX-License-Identifier: MIT
# A fake etcd gRPC endpoint (h2c, python3-h2) that fails in one way after a
# whole request reached it, for etcd_test_grpc.c: each request it reads is
# logged ("grpc PATH" on an HTTP/2 stream, "http1 LINE" for HTTP/1.x), so
# the test sees how many times a request was sent, and in what.
#   python3 grpc_fake.py MODE LOG   prints its port on stdout; runs until its stdin closes
# Modes: h504 (a proxy's 504 text/plain), goaway (GOAWAY NO_ERROR, last
# stream 0, after the body), rst (RST_STREAM INTERNAL_ERROR), silent
# (SETTINGS, then no answer), slowsettings (SETTINGS only after 2.7 s, then
# no answer), errmsg (a grpc-message full of terminal escapes), tls_http1
# (TLS whose ALPN says http/1.1, HTTP/1.1 only; argv[3]: the certificates).
# Exits 77 when python3-h2 is missing (the test skips, saying so).
import os
import socket
import sys
import threading
import time

try:
    import h2.config
    import h2.connection
    import h2.events
except ImportError:
    print("grpc_fake.py: no python3-h2", file=sys.stderr, flush=True)
    sys.exit(77)

mode, log_path = sys.argv[1], sys.argv[2]
tls = None
if mode == "tls_http1":
    # TLS whose ALPN settles on http/1.1 (a TLS proxy without h2), with
    # the certificates of the directory argv[3] (the TLS fixture's).
    import ssl
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(sys.argv[3] + "/server.pem", sys.argv[3] + "/server-key.pem")
    tls.set_alpn_protocols(["http/1.1"])
log_lock = threading.Lock()


def log(line):
    with log_lock, open(log_path, "a") as f:
        f.write(line + "\n")


def serve_h1(c, first):
    buf = first
    while b"\r\n" not in buf:
        d = c.recv(65536)
        if not d:
            return
        buf += d
    log("http1 " + buf.split(b"\r\n")[0].decode(errors="replace"))
    body = b'{"header":{"revision":"3"},"ID":"77","TTL":"5"}'  # the gateway's lease grant
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
              b"Connection: close\r\n\r\n" % len(body) + body)


def answer(conn, sid):
    if mode == "h504":
        conn.send_headers(sid, [(":status", "504"), ("content-type", "text/plain")])
        conn.send_data(sid, b"upstream request timeout", end_stream=True)
    elif mode == "goaway":
        conn.close_connection(error_code=0, last_stream_id=0)
    elif mode == "rst":
        conn.reset_stream(sid, 2)
    elif mode == "errmsg":
        conn.send_headers(sid, [(":status", "200"), ("content-type", "application/grpc"), ("grpc-status", "9"),
                                ("grpc-message", "etcdserver:%20%1B]0;owned%07%1B[2J%1B[31mRED")], end_stream=True)
    # silent, slowsettings: no answer at all


def serve(c):
    try:
        if tls:
            c = tls.wrap_socket(c, server_side=True)
        serve_one(c)
    except OSError:
        pass  # the client went: what it made of us is its test's to say
    finally:
        c.close()


def serve_one(c):
    first = b""
    while len(first) < 5:
        d = c.recv(5 - len(first))
        if not d:
            return
        first += d
    if first != b"PRI *":
        return serve_h1(c, first)
    if mode == "slowsettings":
        time.sleep(2.7)
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    conn.initiate_connection()
    c.sendall(conn.data_to_send())
    paths = {}
    data = first
    while True:
        d = data or c.recv(65536)
        data = b""
        if not d:
            return
        try:
            events = conn.receive_data(d)
        except Exception:
            return
        for ev in events:
            if isinstance(ev, h2.events.RequestReceived):
                paths[ev.stream_id] = dict(ev.headers).get(":path", "?")
            elif isinstance(ev, h2.events.DataReceived):
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                log("grpc " + paths.get(ev.stream_id, "?"))
                answer(conn, ev.stream_id)
        out = conn.data_to_send()
        if out:
            c.sendall(out)


def orphaned():
    # The test holds our stdin: when it goes (done, or died), so do we.
    sys.stdin.buffer.read()
    os._exit(0)


threading.Thread(target=orphaned, daemon=True).start()
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(16)
print(ls.getsockname()[1], flush=True)
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
