#!/usr/bin/env python3
"""slow_requests.py TRAIN_DIR CLIENT_DIR [SLOW_MS]: for each request in CLIENT_DIR/req.txt (lines
"end_ns latency_ns launch_ns", CLOCK_MONOTONIC) slower than SLOW_MS (default 1.1), the lease
events of the client (C:) and of the training job (T:) from 8 ms before the request to its end,
in ms from the request's start (tests/gpu/p99_trace.sh writes both). Events as
lib/hook/leasetrace.c names them; a grant's argument is the lease in ms, a clear's how long the
holder keeps clear, a release's the GPU time charged."""
import glob
import os
import sys


def load(d):
    ev = []
    for path in glob.glob(os.path.join(d, "lease.*")):
        with open(path) as f:
            for line in f:
                name, _dev, t, arg = line.split()
                if name != "lost":   # records past the trace's room, counted
                    ev.append((int(t), name, int(arg)))
    return ev


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    train, client = load(sys.argv[1]), load(sys.argv[2])
    slow = float(sys.argv[3]) if len(sys.argv) > 3 else 1.1
    n = shown = 0
    with open(os.path.join(sys.argv[2], "req.txt")) as f:
        for line in f:
            end, lat, launch = map(int, line.split())
            n += 1
            if lat < slow * 1e6:
                continue
            start = end - lat
            shown += 1
            print(f"request at {start}: {lat / 1e6:.2f} ms (launching {launch / 1e6:.2f} ms)")
            near = [(t, "T:" + name, a) for t, name, a in train if start - 8e6 <= t <= end]
            near += [(t, "C:" + name, a) for t, name, a in client if start - 8e6 <= t <= end]
            for t, name, a in sorted(near):
                print(f"  {(t - start) / 1e6:+8.3f} ms  {name:12s} {a / 1e6 if a > 1000 else a}")
    print(f"{shown} of {n} requests slower than {slow} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
