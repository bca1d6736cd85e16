# ctx_probe.py: PyTorch's context, step by step, in the driver's per-process figure (see ctx_probe.c).
import os, subprocess, torch
def show(what):
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout
    mib = [l.split(", ")[1] for l in out.splitlines() if l.split(", ")[0] == str(os.getpid())]
    print(f"{what:<28} {mib[0] if mib else '-'} MiB", flush=True)
torch.cuda.init(); show("torch.cuda.init")
torch.cuda.current_blas_handle if False else None
x = torch.empty(1, device="cuda"); show("+ empty(1) (alloc only)")
x.zero_(); torch.cuda.synchronize(); show("+ zero_ (first kernel)")
y = x + 1; torch.cuda.synchronize(); show("+ add (second kernel)")
