#!/usr/bin/env python3
"""Writes tests/fuzz/seeds/fuzz_arbiter/: valid message runs of every op of the daemon's protocol
(vgpu/arbiter.h) in fuzz_arbiter's input format (see tests/fuzz/fuzz_arbiter.c):
    u8 who, u8 flags, struct vgpu_arb_req (op, gpu, proc, len: u32 u32 i32 u32; a: 4 x u64;
    uuid: 96 bytes), then len bytes of payload.
The numbers are vgpu/arbiter.h's and the sizes the compiler's (struct vgpu_acct_record 4544,
struct vgpu_acct_wire_filter 440, struct vgpu_acct_total 232, VGPU_ARB_ACCT_TOTALS's a[2]) when
this was written; a seed that drifts from them is still an input, only a less valid one. Run it again after a protocol change:  python3 tests/fuzz/arbiter_seeds.py"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "seeds", "fuzz_arbiter")
UUID = b"GPU-4f6c2a51-93b1-4c7e-8d2a-0b5e6f7a8c91"   # GPU 0 of the simulated h100.json
ROOT, NOBODY, NOBODY2, USER, SUBUID = range(5)
PASS_FD, CLOSE = 1, 2
HELLO, OPEN, JOB, ATTACH, ACQUIRE, RELEASE, DETACH, UNWANT, WANT_FROM, NOTE_END, DRAINING, DRAINED, \
    NOTE_BUSY, EXPECT, SPILLING, YIELDED = range(1, 17)
PL_LOOK, PL_PROMISE, PL_TICKET, PL_UNQUEUE, PL_RELEASE, PL_ADOPT, JC_ENTER, JC_LEAVE, JC_COUNT, PL_GPUS = \
    range(64, 74)
ACCT_RECORD, ACCT_QUERY, ACCT_TOTALS, ACCT_START = range(96, 100)
LEND_SHARE = 128
RECORD, FILTER, TOTAL = 4544, 440, 232
LEASE = (1 << 16) | 1   # the first grant to process entry 0
MS = 1000000


def msg(who, op, gpu=0, proc=-1, a=(0, 0, 0, 0), payload=b"", flags=0, uuid=b""):
    a = tuple(a) + (0,) * (4 - len(a))
    return bytes([who, flags]) + struct.pack("<IIiI4Q96s", op, gpu, proc, len(payload), *a, uuid) + payload


def gpus(*pairs):
    return b"".join(struct.pack("<96sQ", u, n) for u, n in pairs)


def lend(uuid, request, held, borrowed, demoted=0, prio=0, moving=0):
    """struct vgpu_lend_report (vgpu/lend.h): one GPU of a job."""
    return struct.pack("<96s4QiI", uuid, request, held, borrowed, demoted, prio, moving)


def opened(who, key, cap, prio=0, soft=0, flags=0, job=0):
    """OPEN, JOB, ATTACH: job entry `job` (0 for the GPU's first job, 1 for its second...)."""
    return msg(who, OPEN, uuid=UUID) + msg(who, JOB, a=(key, cap, soft, prio), flags=flags) + msg(who, ATTACH, a=(job,))


SEEDS = {
    "hello": msg(ROOT, HELLO, a=(2,)) + msg(NOBODY, HELLO, a=(2,)),
    "open-made-up-uuid": msg(NOBODY, OPEN, uuid=b"GPU-00000000-0000-0000-0000-000000000001"),
    "lease": opened(NOBODY, 0x6e6f626f, 30) + msg(NOBODY, ACQUIRE, proc=0, a=(1,))
             + msg(NOBODY, RELEASE, a=(LEASE, 5 * MS, 1)) + msg(NOBODY, DETACH, proc=0),
    "job-with-limits-file": opened(NOBODY, 1, 30, flags=PASS_FD),
    "uncapped-high": opened(NOBODY, 2, 0, prio=1) + msg(NOBODY, ACQUIRE, proc=0),
    "silent-ops": opened(NOBODY, 3, 30) + msg(NOBODY, ACQUIRE, proc=0)
                  + msg(NOBODY, WANT_FROM, proc=0, a=(1,)) + msg(NOBODY, NOTE_END, proc=0, a=(1, 1))
                  + msg(NOBODY, EXPECT, proc=0, a=(0, 0)) + msg(NOBODY, DRAINING, a=(LEASE, 1))
                  + msg(NOBODY, NOTE_BUSY, a=(LEASE, MS, 0)) + msg(NOBODY, SPILLING, a=(0, 1))
                  + msg(NOBODY, YIELDED) + msg(NOBODY, UNWANT, proc=0)
                  + msg(NOBODY, RELEASE, a=(LEASE, 0, 0)) + msg(NOBODY, DRAINED),
    "two-users-preempt": opened(NOBODY, 4, 30) + msg(NOBODY, ACQUIRE, proc=0)
                         + opened(ROOT, 5, 30, job=1) + msg(ROOT, ACQUIRE, proc=1)
                         + msg(NOBODY, RELEASE, a=(LEASE, 0, 0)) + msg(NOBODY, DRAINED)
                         + msg(NOBODY2, OPEN, uuid=UUID) + msg(NOBODY2, DRAINED)
                         + msg(NOBODY2, DETACH, proc=1),
    # Root's job holds the lease; nobody, with entries of its own, names root's in every request.
    "forged-by-nobody": opened(ROOT, 8, 30) + msg(ROOT, ACQUIRE, proc=0) + opened(NOBODY, 9, 30, job=1)
                        + msg(NOBODY, ATTACH, a=(0,)) + msg(NOBODY, ACQUIRE, proc=0)
                        + msg(NOBODY, RELEASE, a=(LEASE, 0, 0)) + msg(NOBODY, UNWANT, proc=0)
                        + msg(NOBODY, WANT_FROM, proc=0, a=(1,)) + msg(NOBODY, NOTE_END, proc=0, a=(1, 1))
                        + msg(NOBODY, EXPECT, proc=0, a=(1, 1)) + msg(NOBODY, DRAINING, a=(LEASE, 1))
                        + msg(NOBODY, NOTE_BUSY, a=(LEASE, MS, 0)) + msg(NOBODY, SPILLING, a=(0, 1))
                        + msg(NOBODY, DRAINED) + msg(NOBODY, DETACH, proc=0)
                        + msg(SUBUID, OPEN, uuid=UUID) + msg(SUBUID, SPILLING, a=(1, 1)),
    "reconnect": opened(NOBODY, 6, 30) + msg(NOBODY, ACQUIRE, proc=0, flags=CLOSE)
                 + opened(NOBODY, 6, 30) + opened(SUBUID, 7, 30, job=1),
    "key-cycling": b"".join(opened(NOBODY, 0x100 + i, 30) + msg(NOBODY, ACQUIRE, proc=0)
                            + msg(NOBODY, RELEASE, a=(LEASE, 0, 0)) + msg(NOBODY, DETACH, proc=0)
                            for i in range(3)),
    "placement": msg(USER, PL_LOOK, payload=gpus((UUID, 80 << 30)))
                 + msg(USER, PL_PROMISE, a=(1,), payload=gpus((UUID, 4 << 30)))
                 + msg(USER, PL_TICKET, a=(4 << 30, 1)) + msg(USER, PL_UNQUEUE)
                 + msg(USER, PL_ADOPT, a=(1,)) + msg(USER, PL_RELEASE),
    "job-count": msg(USER, JC_ENTER, a=(2, 1), payload=gpus((UUID, 0)))
                 + msg(USER, JC_COUNT, payload=gpus((UUID, 0))) + msg(USER, JC_LEAVE),
    "gpu-list": msg(NOBODY, PL_GPUS) + msg(USER, PL_GPUS) + msg(ROOT, PL_GPUS),
    # Lending across users: root borrows, nobody's promise waits; nobody lies and asks high.
    "lend": msg(ROOT, PL_PROMISE, a=(0, 1), payload=gpus((UUID, 2 << 30)))
            + msg(ROOT, LEND_SHARE, a=(0x111,), payload=lend(UUID, 2 << 30, 72 << 30, 70 << 30))
            + msg(NOBODY, PL_PROMISE, a=(0, 1), payload=gpus((UUID, 60 << 30)))
            + msg(NOBODY, LEND_SHARE, a=(0x222,), payload=lend(UUID, 80 << 30, 0, 1 << 40, 1 << 41, 1, 1))
            + msg(ROOT, LEND_SHARE, a=(0x111,), payload=lend(UUID, 2 << 30, 72 << 30, 70 << 30, 70 << 30))
            + msg(NOBODY, LEND_SHARE, a=(0,), payload=lend(b"not-a-gpu", 1, 0, 0)),
    "acct": msg(NOBODY, ACCT_START, a=(0, RECORD), payload=b"0123456789abcdef")
            + msg(NOBODY, ACCT_RECORD, a=(1, RECORD), payload=bytes(RECORD))
            + msg(ROOT, ACCT_QUERY, a=(0, RECORD), payload=bytes(FILTER))
            + msg(NOBODY, ACCT_TOTALS, a=(0, RECORD, TOTAL), payload=bytes(FILTER)),
}

os.makedirs(OUT, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print(f"{len(SEEDS)} seeds in {OUT}")
