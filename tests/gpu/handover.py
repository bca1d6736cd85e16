#!/usr/bin/env python3
"""handover.py DIR: merges the lease traces that VGPU_LEASE_TRACE=DIR wrote (lib/hook/leasetrace.h)
and prints where the GPU time of a shared GPU went: held by some job (grant to release), idle
while some process waited for a lease (the handover gap, and time nobody was entitled), and the
drains (a lease's end to its release). Works on the simulated GPU and on a real one.
"""
import collections
import glob
import os
import sys


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else 0


def main():
    if len(sys.argv) != 2:
        print("usage: handover.py DIR", file=sys.stderr)
        return 2
    ev = []
    for path in glob.glob(os.path.join(sys.argv[1], "lease.*")):
        pid = int(path.rsplit(".", 1)[1])
        with open(path) as f:
            for seq, line in enumerate(f):
                name, dev, t, arg = line.split()
                if name != "lost":
                    ev.append((int(t), pid, seq, name, int(arg)))
    if not ev:
        print("handover.py: no events", file=sys.stderr)
        return 1
    # By time, then in each file's order: a want and its grant often share a nanosecond, and
    # sorting by name put the grant first, pairing each grant with the previous request's want.
    ev.sort()
    ev = [(t, pid, name, arg) for t, pid, _, name, arg in ev]
    t0, t1 = ev[0][0], ev[-1][0]
    holder = None           # (pid, since)
    waiting = {}            # pid -> since
    last_release = None
    held = idle_waiting = idle_nobody = 0
    gaps, drains = [], []
    end_at = {}
    fences = []
    waits = collections.defaultdict(list)   # pid -> want-to-grant times
    cur = t0
    for t, pid, name, arg in ev:
        # account the interval [cur, t) by the state before this event
        if holder is not None:
            held += t - cur
        elif waiting:
            idle_waiting += t - cur
        else:
            idle_nobody += t - cur
        cur = t
        if name == "want":
            waiting.setdefault(pid, t)
        elif name == "grant":
            since = waiting.pop(pid, None)
            if since is not None:
                waits[pid].append(t - since)
            if last_release is not None and holder is None:
                gaps.append(t - last_release)
            holder = (pid, t)
        elif name == "end":
            end_at[pid] = t
        elif name in ("release", "preempted"):
            if pid in end_at:
                drains.append(t - end_at.pop(pid))
            if holder is not None and holder[0] == pid:
                holder = None
                last_release = t
        elif name == "fence":
            fences.append(arg)
    wall = max(1, t1 - t0)
    print(f"wall {wall / 1e9:.3f} s: lease held {100 * held / wall:.1f} %, free while a process waited "
          f"{100 * idle_waiting / wall:.1f} %, free with nobody waiting {100 * idle_nobody / wall:.1f} %")
    print(f"handover gap (release to the next grant, {len(gaps)}): p50 {pct(gaps, .5) / 1e3:.0f} us, "
          f"p90 {pct(gaps, .9) / 1e3:.0f} us, max {max(gaps, default=0) / 1e3:.0f} us")
    print(f"drain (end to release, {len(drains)}): p50 {pct(drains, .5) / 1e3:.0f} us, "
          f"p90 {pct(drains, .9) / 1e3:.0f} us, max {max(drains, default=0) / 1e3:.0f} us")
    print(f"fence waits ({len(fences)}): p50 {pct(fences, .5) / 1e3:.0f} us, p90 {pct(fences, .9) / 1e3:.0f} us")
    for pid, w in sorted(waits.items()):
        print(f"pid {pid} lease waits ({len(w)}): p50 {pct(w, .5) / 1e3:.0f} us, p99 {pct(w, .99) / 1e3:.0f} us, "
              f"max {max(w) / 1e3:.0f} us")
    per = collections.Counter(name for _, _, name, _ in ev)
    print("events: " + ", ".join(f"{k} {v}" for k, v in sorted(per.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
