#!/usr/bin/env python3
"""Where one `redlock run --key steps -- true` spends its time, from system-call timestamps.

Runs redlock N times (15 by default) under `strace -f --seccomp-bpf`, tracing only the calls
that mark a step (execve, connect, sendto, recvfrom, clone, clone3, wait4, exit_group): with the
seccomp filter the calls not traced run at full speed, so the steps are close to a run's own.
Prints the median of each step, in ms. Redis only (the markers are RESP requests).

Usage: scripts/run-steps.py REDLOCK_BINARY redis://HOST:PORT [N]   (needs strace)
"""
import statistics
import subprocess
import sys
import tempfile

TRACED = "trace=execve,connect,sendto,recvfrom,clone,clone3,wait4,exit_group"


def one_run(binary, url, out):
    subprocess.run(
        ["strace", "-f", "--seccomp-bpf", "-e", TRACED, "-ttt", "-o", out,
         binary, "run", "--url", url, "--key", "steps", "--", "true"],
        check=True)
    events = []
    for line in open(out):
        pid, ts, rest = line.split(None, 2)
        events.append((int(pid), float(ts), rest))
    main = events[0][0]

    def first(pred, after=0.0):
        return next(ts for pid, ts, rest in events if ts >= after and pred(pid, rest))

    start = events[0][1]
    connect = first(lambda p, r: r.startswith("connect(") and "htons" in r)
    role_sent = first(lambda p, r: r.startswith("sendto(") and "ROLE" in r)
    role_answered = first(lambda p, r: r.startswith("recvfrom("), role_sent)
    take_sent = first(lambda p, r: r.startswith("sendto(") and "EVALSHA" in r, role_answered)
    take_answered = first(lambda p, r: r.startswith("recvfrom("), take_sent)
    spawned = first(lambda p, r: p == main and r.startswith(("clone(", "clone3(")), take_answered)
    child = next(pid for pid, ts, rest in events
                 if ts >= spawned and pid != main and rest.startswith("execve(") and '"true"' in rest)
    execd = max(ts for pid, ts, rest in events if pid == child and "execve" in rest)
    ended = first(lambda p, r: p == child and r.startswith("exit_group"))
    reaped = first(lambda p, r: "wait4(" in r and f"= {child}" in r, ended)
    release_sent = first(lambda p, r: r.startswith("sendto(") and "EVALSHA" in r, reaped)
    release_answered = first(lambda p, r: r.startswith("recvfrom("), release_sent)
    exited = first(lambda p, r: p == main and r.startswith("exit_group"), release_answered)
    return [
        ("exec to the first connect (loader, parse, signals, watchdog, threads)", connect - start),
        ("connecting, and ROLE asked and answered", role_answered - connect),
        ("the take (EVALSHA) sent and answered", take_answered - role_answered),
        ("to the command's fork", spawned - take_answered),
        ("the command's fork to its exec", execd - spawned),
        ("the command's exit to redlock reaping it", reaped - ended),
        ("reaped to the release sent (checking for leftovers)", release_sent - reaped),
        ("the release (EVALSHA) sent and answered", release_answered - release_sent),
        ("the release's answer to redlock's exit", exited - release_answered),
        ("the whole run", exited - start),
    ]


def main():
    binary, url = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    steps = {}
    with tempfile.NamedTemporaryFile(suffix=".strace") as out:
        for _ in range(n):
            for name, seconds in one_run(binary, url, out.name):
                steps.setdefault(name, []).append(seconds * 1000)
    print(f"| step (median of {n} runs) | time |\n|---|---:|")
    for name, ms in steps.items():
        print(f"| {name} | {statistics.median(ms):.2f} ms |")


if __name__ == "__main__":
    main()
