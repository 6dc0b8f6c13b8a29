#!/usr/bin/env python3
"""What a plain run's scripts cost Redis, in instructions, beside a bare lock and a floor.

Starts a throwaway redis-server under valgrind's callgrind, on a free loopback port, and counts
the instructions Redis spends in `call()` (what INFO commandstats times) per take + give-back
pair, over 250 pairs sent one after another on one connection:

  bare     the benchmark's bare lock (examples/bare_lock.rs): SET NX PX + INCR, GET + DEL
  floor    the least a plain run could send and still keep what it keeps today: the clock as
           the fencing token (TIME, SET ... GET), the holder's details (HSET, PEXPIRE), the run
           in the record (HINCRBY, HSET), and at the release GET, DEL, the run's end (HSET),
           its count (HINCRBY) and whether anyone waits (EXISTS): 11 commands, written tight
  minimal  only the lock, the clock as the fencing token and the check for waiters
  redlock  the scripts the given build sends, as MONITOR shows them in one real run

Unlike timings, the counts are the same from run to run (within a few hundred instructions of
Lua's garbage collector), so they show what a change to a script costs. Usage:

    cargo build --release && scripts/script-cost.py [REDLOCK_BINARY]   (default: target/release/redlock)

Needs redis-server, redis-cli and valgrind; takes about a minute.
"""

import ast
import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

PAIRS = 250


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def reply(sock):
    """Reads what the server sent until it pauses (one small reply here)."""
    sock.settimeout(5)
    data = sock.recv(1 << 20)
    sock.settimeout(0.05)
    try:
        while True:
            more = sock.recv(1 << 20)
            if not more:
                break
            data += more
    except socket.timeout:
        pass
    return data


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, work):
        self.work = work
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/cg.%p",
             "redis-server", "--port", str(self.port), "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            try:
                with socket.create_connection(("127.0.0.1", self.port)) as s:
                    s.sendall(encode("PING"))
                    if reply(s).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.1)
        raise SystemExit("redis-server under valgrind did not start")

    def control(self, what):
        subprocess.run(["callgrind_control", what, str(self.proc.pid)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)

    def instructions_in_call(self):
        self.control("-d")
        time.sleep(0.3)
        # Dumps are numbered in order: cg.PID.1, cg.PID.2, ...
        dumps = glob.glob(f"{self.work}/cg.{self.proc.pid}.*")
        dump = max(dumps, key=lambda d: int(d.rsplit(".", 1)[1]))
        out = subprocess.run(["callgrind_annotate", "--inclusive=yes", dump],
                             capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if re.search(r":call \[", line):
                return int(line.split()[0].replace(",", ""))
        raise SystemExit("no call() in the callgrind dump")

    def pair_cost(self, take, give_back, take_args, give_back_args):
        with socket.create_connection(("127.0.0.1", self.port)) as s:
            shas = []
            for src in (take, give_back):
                s.sendall(encode("SCRIPT", "LOAD", src))
                shas.append(re.search(rb"([0-9a-f]{40})", reply(s)).group(1))
            for _ in range(3):
                for sha, args in zip(shas, (take_args, give_back_args)):
                    s.sendall(encode("EVALSHA", sha, *args))
                    reply(s)
            self.control("-z")
            for _ in range(PAIRS):
                for sha, args in zip(shas, (take_args, give_back_args)):
                    s.sendall(encode("EVALSHA", sha, *args))
                    r = reply(s)
                    if r.startswith(b"-"):
                        raise SystemExit(f"a script failed: {r!r}")
            return self.instructions_in_call() / PAIRS

    def redlock_scripts(self, binary):
        """The take and give-back a plain run of `binary` sends, with their KEYS and ARGV."""
        with socket.create_connection(("127.0.0.1", self.port)) as s:
            s.sendall(encode("SCRIPT", "FLUSH"))
            reply(s)
        monitor = subprocess.Popen(["redis-cli", "-p", str(self.port), "monitor"],
                                   stdout=subprocess.PIPE, text=True)
        monitor.stdout.readline()
        subprocess.run([binary, "run", "--url", f"redis://127.0.0.1:{self.port}",
                        "--key", "cost", "--", "true"], check=True)
        time.sleep(1)
        monitor.terminate()
        scripts = []
        for line in monitor.communicate()[0].splitlines():
            if '"EVAL"' in line:
                words = [ast.literal_eval('"' + w + '"')
                         for w in re.findall(r'"((?:[^"\\]|\\.)*)"', line)]
                scripts.append((words[1], words[2:]))
        if len(scripts) != 2:
            raise SystemExit(f"expected a take and a give-back, MONITOR showed {len(scripts)}")
        # Sent once whole, as the run sent them, so the replay starts where the run ended.
        with socket.create_connection(("127.0.0.1", self.port)) as s:
            for src, args in scripts:
                s.sendall(encode("EVAL", src, *args))
                reply(s)
        return scripts

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


TOKEN = "3f6dfc33-da69-42c9-b63c-e8b54e38a842"
RUN = ('{"token":"%s","host":"vm","pid":"3808","started":"1796163217944",'
       '"fence":"1796163217944748","n":"1"' % TOKEN)
ENDED = RUN + ',"ended":"1796163217948","outcome":"success","status":"0"}'

BARE = (
    """if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2]) end
return false""",
    """if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0""",
    (2, "b:{k}", "b:{k}:fence", TOKEN, 30000),
    (1, "b:{k}", TOKEN),
)

FLOOR = (
    """local lock, fence, holder, counts = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, ttl = ARGV[1], ARGV[2]
if not redis.call('SET', lock, token, 'NX', 'PX', ttl) then return false end
local t = redis.call('TIME')
local now = t[1] .. string.sub('00000' .. t[2], -6)
local was = redis.call('SET', fence, now, 'PX', '3456000000', 'GET')
redis.call('HSET', holder, 'token', token, 'host', ARGV[3], 'pid', ARGV[4], 'argv', ARGV[5],
  'started', ARGV[6])
redis.call('PEXPIRE', holder, ttl)
local n = redis.call('HINCRBY', counts, 'n', '1')
redis.call('HSET', counts, string.format('run:%d', n % 20), ARGV[7] .. ',"fence":"' .. now .. '"}')
return {now, n}""",
    """local lock, holder, counts, waiting, queue = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
if redis.call('GET', lock) ~= ARGV[1] then return 0 end
redis.call('DEL', lock, holder)
redis.call('HSET', counts, ARGV[2], ARGV[3], 'last_ended', ARGV[3])
redis.call('HINCRBY', counts, ARGV[4], '1')
if redis.call('EXISTS', waiting, queue) > 0 then return 2 end
return 1""",
    (4, "f:{k}", "f:{k}:fence", "f:{k}:holder", "f:{k}:counts", TOKEN, 30000, "vm", 3808,
     "true", 1796163217, RUN),
    (5, "f:{k}", "f:{k}:holder", "f:{k}:counts", "f:{k}:waiting", "f:{k}:queue", TOKEN,
     "run:1", ENDED, "success"),
)

MINIMAL = (
    """if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return false end
local t = redis.call('TIME')
return redis.call('SET', KEYS[2], t[1] .. string.sub('00000' .. t[2], -6), 'PX', '3456000000',
  'GET')""",
    """if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
if redis.call('EXISTS', KEYS[2], KEYS[3]) > 0 then return 2 end
return 1""",
    (2, "m:{k}", "m:{k}:fence", TOKEN, 30000),
    (3, "m:{k}", "m:{k}:waiting", "m:{k}:queue", TOKEN),
)


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/redlock"
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"script-cost: no redlock at {binary}: run cargo build --release first")
    for tool in ("redis-server", "redis-cli", "valgrind", "callgrind_annotate"):
        if not shutil.which(tool):
            raise SystemExit(f"script-cost: {tool} is missing (apt-get install redis-server valgrind)")
    with tempfile.TemporaryDirectory() as work:
        server = Server(work)
        try:
            (take, take_args), (give, give_args) = server.redlock_scripts(binary)
            rows = [("redlock, " + binary, (take, give, take_args, give_args)),
                    ("bare lock (4 commands)", BARE), ("minimal (6 commands)", MINIMAL),
                    ("floor (11 commands)", FLOOR)]
            costs = [(name, server.pair_cost(*row)) for name, row in rows]
            bare = costs[1][1]
            for name, cost in costs:
                print(f"{name:40} {cost / 1000:7.1f}k instructions a pair  {cost / bare:4.2f}x")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
