"""multi.py MODE SECONDS: a job that spans GPUs (issue 26), for tests/gpu/multi.sh.
  rr    one process, round robin over every visible GPU: per step, 8 matmuls (2048x2048 fp32) on
        each GPU in turn, then a synchronize of all; prints "steps_per_s=N" (per GPU: each step
        runs on every GPU)
  nccl  one rank per visible GPU (torch.multiprocessing, NCCL on localhost): per step a 256 MiB
        all-reduce and 8 matmuls (4096x4096 fp32); prints "steps_per_s=N busbw_gbs=N" (rank 0's;
        the all-reduce's bus bytes over the whole step's time, not over the all-reduce alone)."""
import os
import sys
import time

import torch


def rr(seconds):
    n = torch.cuda.device_count()
    ab = [(torch.randn(2048, 2048, device=f"cuda:{g}"), torch.randn(2048, 2048, device=f"cuda:{g}")) for g in range(n)]
    def step():
        for a, b in ab:
            for _ in range(8):
                a @ b
        for g in range(n):
            torch.cuda.synchronize(g)
    for _ in range(5):
        step()
    t, steps = time.time(), 0
    while time.time() - t < seconds:
        step()
        steps += 1
    print("gpus=%d steps_per_s=%.1f" % (n, steps / (time.time() - t)))


def rank_main(rank, world, seconds, port):
    import torch.distributed as dist
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    x = torch.ones(64 << 20, device="cuda")          # 256 MiB of fp32
    a, b = torch.randn(4096, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda")
    def step():
        dist.all_reduce(x)
        for _ in range(8):
            a @ b
        torch.cuda.synchronize()
    for _ in range(5):
        step()
    dist.barrier()
    t, steps = time.time(), 0
    while True:
        step()
        steps += 1
        done = torch.tensor([1.0 if time.time() - t >= seconds else 0.0], device="cuda")
        dist.all_reduce(done)
        if done.item() > 0:
            break
    el = time.time() - t
    if rank == 0:
        # all-reduce bus bandwidth: 2 (n-1)/n of the buffer per step
        busbw = steps * (256 << 20) * 2 * (world - 1) / world / el / 1e9
        print("ranks=%d steps_per_s=%.1f busbw_gbs=%.1f" % (world, steps / el, busbw))
    dist.destroy_process_group()


if __name__ == "__main__":
    mode, seconds = sys.argv[1], float(sys.argv[2])
    if mode == "rr":
        rr(seconds)
    else:
        import torch.multiprocessing as mp
        world = torch.cuda.device_count()
        mp.spawn(rank_main, args=(world, seconds, 29500 + os.getpid() % 1000), nprocs=world)
