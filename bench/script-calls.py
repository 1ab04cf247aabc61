#!/usr/bin/env python3
"""The calls bench/script-instructions.sh sends to Redis.

A folded GCRA batch is one binary argument (source/redis/protocol.go,
foldedFormat), which redis-benchmark cannot send (its arguments are C
strings), so the calls are built here, with the same settings as the shell
script (MODE, PACK, GROUPED, BINARY, INCREMENT, BURST from the environment):

  script-calls.py resp SHA CALLS
      writes CALLS EVALSHA calls as RESP, for redis-cli --pipe
  script-calls.py load PORT CLIENTS REQUESTS incr|minimal SHA|script SHA
      sends REQUESTS requests from CLIENTS connections, each waiting for
      its reply before it sends the next (as redis-benchmark -P 1)

Each call's keys end in a random number below 1,000 (redis-benchmark's
__rand_int__ with -r 1000): 1,000 buckets per batch of a call.
"""
import os
import random
import selectors
import socket
import struct
import sys

NOW = (1790000000, 123456789)


def limbs(v):
    return v // 10**9, v % 10**9


def folded(code, now, increment, burst):
    """A folded batch as foldedBatch writes it: '>Bi5I4i5I4i5I4'."""
    out = bytes([code])
    for v in (now, increment, burst):
        hi, lo = limbs(v)
        out += hi.to_bytes(5, "big", signed=True) + struct.pack(">I", lo)
    return out


def folded_rate(code, now, until, cost, window, rate):
    """A folded rate batch as foldedRateBatch writes it: '>Bi5I4i5I4ddd'."""
    out = bytes([code])
    for v in (now, until):
        hi, lo = limbs(v)
        out += hi.to_bytes(5, "big", signed=True) + struct.pack(">I", lo)
    return out + struct.pack(">ddd", cost, window, rate)


def script_call(sha):
    """The keys and arguments of one call; keys hold {r} for the random number."""
    mode = os.environ.get("MODE", "gcra")
    pack = int(os.environ.get("PACK", "10"))
    grouped = bool(os.environ.get("GROUPED"))
    fmt = ("2" if grouped else "1") + ("b" if os.environ.get("BINARY") else "")
    increment = int(os.environ.get("INCREMENT", "36000000000"))
    burst = int(os.environ.get("BURST", "3600000000000"))
    now = NOW[0] * 10**9 + NOW[1]
    keys, args = [], []
    if pack > 0:
        args = ["M", "60000", fmt]  # a packed call's header
    for b in range(1, max(pack, 1) + 1):
        if mode == "erl_call":
            keys += ([f"lim:v2:{{{{r}}}}7:ip-{b}", f"lim:v2:{{{{r}}}}!7:ip-{b}"] if grouped
                     else [f"lim:v1:{{ip-{b}-{{r}}}}7", f"lim:v1:{{ip-{b}-{{r}}}}7!"])
        elif mode == "check_rate":
            keys.append(f"lim:v2:{{{{r}}}}7:ip-{b}" if grouped else f"lim:v1:{{ip-{b}-{{r}}}}7")
        else:
            keys.append(f"lim:v2:{{{{r}}}}3:key-{b}" if grouped else f"lim:v1:{{3:key-{b}-{{r}}}}")

        def op(letter, n):
            # a batch's op and key count, or a call of its own: op, margin, format
            return [letter, str(n)] if pack > 0 else [letter, "60000", fmt]
        if mode == "gcra":
            # a one-key spend of mode 0: folded in a packed call (code 0), as
            # the service sends it
            if pack > 0:
                args.append(folded(0, now, increment, burst))
            else:
                args += ["S", "60000", fmt, *map(str, NOW), "0", str(increment), str(burst)]
        elif mode == "window":
            args += op("S", 1) + [*map(str, NOW), "W0", "1", "100", "60000"]
        elif mode == "check_rate":
            box = f"lim:v2:{{{{r}}}}!7:ip-{b}" if grouped else f"lim:v1:{{ip-{b}-{{r}}}}7!"
            if pack > 0 and not grouped:
                # folded in a packed call in format v1, its box entry's name after it
                args += [folded_rate(0, now, 1790000060123456789, 1, 10, 100), box]
            else:
                args += op("S", 1) + [*map(str, NOW), "BOX", box, "1790000060123456789", "R0", "1", "10", "100"]
        elif mode == "erl_call":
            args += op("E", 2) + [*map(str, NOW), "1", "1", "10", "100", "A", "1790000060123456789"]
        else:
            sys.exit(f"unknown MODE {mode} (gcra, window, check_rate, erl_call)")
    return ["EVALSHA", sha, str(len(keys)), *keys, *args]


def resp(words, r):
    out = [b"*%d\r\n" % len(words)]
    for w in words:
        if isinstance(w, str):
            w = w.replace("{r}", str(r)).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(w), w))
    return b"".join(out)


def reply_end(buf, i=0):
    """The end of the RESP reply at buf[i:], or None while incomplete."""
    nl = buf.find(b"\r\n", i)
    if nl < 0:
        return None
    kind, rest = buf[i:i + 1], buf[i + 1:nl]
    if kind in b"+-:":
        return nl + 2
    if kind == b"$":
        n = int(rest)
        end = nl + 2 + max(n, 0) + (2 if n >= 0 else 0)
        return end if len(buf) >= end else None
    if kind == b"*":
        j = nl + 2
        for _ in range(max(int(rest), 0)):
            j = reply_end(buf, j)
            if j is None:
                return None
        return j
    raise ValueError(f"not a RESP reply: {buf[i:i + 20]!r}")


def load(port, clients, requests, words):
    sel = selectors.DefaultSelector()
    left, sent = requests, 0
    for _ in range(clients):
        s = socket.create_connection(("127.0.0.1", port))
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, bytearray())
        if sent < requests:
            s.sendall(resp(words, random.randrange(1000)))
            sent += 1
    while left > 0:
        for key, _ in sel.select():
            buf = key.data
            buf += key.fileobj.recv(1 << 16)
            while (end := reply_end(buf)) is not None:
                if buf[:1] == b"-":
                    sys.exit(f"error reply: {bytes(buf[:end])!r}")
                del buf[:end]
                left -= 1
                if sent < requests:
                    key.fileobj.sendall(resp(words, random.randrange(1000)))
                    sent += 1


def main():
    what = sys.argv[1]
    if what == "resp":
        words = script_call(sys.argv[2])
        out = sys.stdout.buffer
        for _ in range(int(sys.argv[3])):
            out.write(resp(words, random.randrange(1000)))
    elif what == "load":
        port, clients, requests, kind = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
        if kind == "incr":
            words = ["INCR", "incr:{r}"]
        elif kind == "minimal":
            words = ["EVALSHA", sys.argv[6], "10", *[f"min:{b}:{{r}}" for b in range(1, 11)], *["1790000000133456789"] * 10]
        else:
            words = script_call(sys.argv[6])
        load(port, clients, requests, words)
    else:
        sys.exit(__doc__)


main()
