#!/usr/bin/env python3
# tests/integration/prof_http_client.py — the HTTP client of tests/integration/prof_http*.sh (raw
# sockets, so that malformed and hostile requests can be sent as well).
#   req ADDR METHOD TARGET OUT   one request; prints the status code, writes
#                                the headers to OUT.h and the body to OUT
#   raw ADDR BYTES-FILE          send the file's bytes; prints the status code
#   attack ADDR                  junk bytes, a 1 MB header, 50 half-open
#                                connections, 1000 requests in a row; checks
#                                each answer, prints one line per part
# ADDR: HOST:PORT, [V6]:PORT or unix:PATH.  Exit 0, or 1 with a FAIL line.
# PROF_HTTP_SENT=FILE: create FILE once a request has been sent.
import os
import socket
import sys
import time


def connect(addr, timeout=10.0):
    if addr.startswith("unix:"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(addr[5:])
        return s
    host, port = addr.rsplit(":", 1)
    fam = socket.AF_INET
    if host.startswith("["):
        host, fam = host[1:-1], socket.AF_INET6
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect((host, int(port)))
    return s


def exchange(addr, data, timeout=10.0):
    """Send data, read to EOF: (status, headers, body); status -1 when the
    server closed without an answer."""
    s = connect(addr, timeout)
    try:
        s.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass
    sent = os.environ.get("PROF_HTTP_SENT")
    if sent:                      # tell the driver the request is out
        open(sent, "w").close()
    buf = b""
    try:
        while True:
            k = s.recv(65536)
            if not k:
                break
            buf += k
    except ConnectionResetError:
        pass
    s.close()
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        return -1, [], b""
    return status, [l.decode("latin-1") for l in lines[1:]], body


def get(addr, target, method="GET"):
    return exchange(addr, ("%s %s HTTP/1.1\r\nHost: x\r\nUser-Agent: t\r\n\r\n"
                           % (method, target)).encode())


fails = 0


def check(what, ok, detail=""):
    global fails
    if not ok:
        fails += 1
        print("FAIL: %s %s" % (what, detail))


def heap_ok(addr, what):
    st, hdr, body = get(addr, "/debug/pprof/heap")
    check(what, st == 200 and body[:2] == b"\x1f\x8b", "status %d, %d bytes" % (st, len(body)))


def attack(addr):
    t0 = time.time()
    # junk: a binary blob, a line without a version, a bare newline pair
    for junk in (bytes(range(256)) * 4 + b"\r\n\r\n", b"GARBAGE\r\n\r\n", b"\n\n",
                 b"GET /debug/pprof/heap HTTP/9.9\r\n\r\n", b"G\x00T / HTTP/1.1\r\n\r\n"):
        st, _, _ = exchange(addr, junk)
        check("junk %r" % junk[:16], st in (400, 505), "status %d" % st)
    heap_ok(addr, "scrape after junk")
    print("junk: answered 400/505, scrape ok")
    # a 1 MB header: answered 431 (or cut off) without reading it all
    big = b"GET /debug/pprof/heap HTTP/1.1\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
    st, _, _ = exchange(addr, big)
    check("1 MB header", st in (431, -1), "status %d" % st)
    heap_ok(addr, "scrape after the 1 MB header")
    print("1 MB header: status %d, scrape ok" % st)
    # 50 half-open connections (connected, half a request, never finished)
    held = []
    for i in range(50):
        s = connect(addr)
        s.sendall(b"GET /debug/pprof/heap HTTP/1.1\r\nHost")
        held.append(s)
    t = time.time()
    heap_ok(addr, "scrape while 50 connections are half open")
    waited = time.time() - t
    check("scrape beside half-open connections took %.2f s" % waited, waited < 2.0)
    for s in held:
        s.close()
    print("50 half-open: scrape answered in %.3f s" % waited)
    # 1000 requests in a row, of every kind
    paths = ["/debug/pprof/heap", "/debug/pprof/allocs", "/debug/pprof/", "/nope",
             "/debug/pprof/heap?debug=1"]
    want = {"/nope": 404}
    t = time.time()
    for i in range(1000):
        p = paths[i % len(paths)]
        st, _, _ = get(addr, p)
        check("request %d %s" % (i, p), st == want.get(p, 200), "status %d" % st)
        if fails > 5:
            break
    print("1000 requests: %.2f s" % (time.time() - t))
    # a client that never finishes its head is cut off at the deadline (5 s)
    s = connect(addr)
    s.sendall(b"GET /debug/pprof/heap HTTP/1.1\r\n")
    t = time.time()
    try:
        got = s.recv(100)
    except (socket.timeout, ConnectionResetError):
        got = b"?"
    waited = time.time() - t
    s.close()
    check("slow head cut off after %.2f s (%r)" % (waited, got[:20]), got == b"" and 4.5 < waited < 7)
    print("slow head: closed after %.1f s" % waited)
    heap_ok(addr, "scrape after everything")
    print("attack done in %.1f s" % (time.time() - t0))


def main():
    cmd = sys.argv[1]
    if cmd == "req":
        addr, method, target, out = sys.argv[2:6]
        st, hdr, body = get(addr, target, method)
        with open(out + ".h", "w") as f:
            f.write("\n".join(hdr) + "\n")
        with open(out, "wb") as f:
            f.write(body)
        print(st)
    elif cmd == "raw":
        with open(sys.argv[3], "rb") as f:
            st, _, _ = exchange(sys.argv[2], f.read())
        print(st)
    elif cmd == "attack":
        attack(sys.argv[2])
    sys.exit(1 if fails else 0)


main()
