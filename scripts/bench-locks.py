#!/usr/bin/env python3
"""Copy one lock's keys to N lock names, for scripts/bench.sh's `redlock list` row.

Usage: bench-locks.py PORT DB PREFIX TEMPLATE N

Every key of the lock TEMPLATE (PREFIX{TEMPLATE}, PREFIX{TEMPLATE}:...) in database DB of the
Redis on 127.0.0.1:PORT is copied, DUMP then RESTORE with its remaining ttl, to the names
l00000 ... l{N-1}: N locks exactly as the build that wrote the template lays them out, whatever
that layout is, in about a second (pipelined). Python's standard library only.
"""

import socket
import sys


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            self.buf += self.sock.recv(1 << 16)
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exactly(self, n):
        while len(self.buf) < n + 2:
            self.buf += self.sock.recv(1 << 16)
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def reply(self):
        line = self.line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.exactly(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RuntimeError("unexpected reply %r" % line)

    def call(self, *args):
        self.sock.sendall(encode(*args))
        return self.reply()


def main():
    port, db, prefix, template, n = sys.argv[1:]
    con = Conn(int(port))
    con.call("SELECT", db)
    name = "%s{%s}" % (prefix, template)
    keys, cursor = [], b"0"
    while True:
        cursor, batch = con.call("SCAN", cursor, "MATCH", name + "*", "COUNT", 1000)
        keys += [k for k in batch if k == name.encode() or k.startswith((name + ":").encode())]
        if cursor == b"0":
            break
    if not keys:
        sys.exit("bench-locks: no keys for %s" % name)
    copies = [(k, con.call("DUMP", k), con.call("PTTL", k)) for k in keys]
    sent = 0
    for i in range(int(n)):
        new = "%s{l%05d}" % (prefix, i)
        for key, dump, pttl in copies:
            con.sock.sendall(encode("RESTORE", key.replace(name.encode(), new.encode(), 1),
                                    max(pttl, 0), dump, "REPLACE"))
            sent += 1
        if sent >= 1000:
            for _ in range(sent):
                con.reply()
            sent = 0
    for _ in range(sent):
        con.reply()
    print(len(keys))


if __name__ == "__main__":
    main()
