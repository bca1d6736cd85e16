# uvm_rates.py: how fast managed memory moves on a real GPU, the source of the fake's migration
# rates (tests/fakegpu/README.md, "Managed memory's time"; common/models.c H200_UVM). Needs CuPy
# and one GPU with 20 GiB free (it takes 4 x 4 GiB of managed memory, never more than fits).
# Each line: a step, its time, and 4 GiB over that time. Run as is (one line per step):
#   python3 tests/fakegpu/tools/uvm_rates.py
#
# Run on 2026-12-02 on an NVIDIA H200 (driver 580.159.04, PCIe Gen5 x16, 143156 MiB free):
#   fresh kernel 0.6855s 6.3GB/s        <- a kernel's faults on pages never touched
#   resident kernel 0.0052s 826.2GB/s
#   pf host 1.1576s 3.7GB/s             <- the first prefetch to the host (host pages made)
#   host-data kernel 0.6579s 6.5GB/s    <- a kernel's faults on pages with data on the host
#   pf host 0.2795s 15.4GB/s            <- a prefetch to the host
#   pf dev 0.0846s 50.8GB/s             <- a prefetch of data to the device
#   resident kernel 0.0052s 824.4GB/s
#   adv cpu 0.0006s 7418.0GB/s
#   adv cpu+pf host 0.2761s 15.6GB/s
#   cpu-pref kernel 1.8645s 2.3GB/s     <- preferred CPU: mapped, read over the link, not migrated
#   cpu-pref kernel 0.1019s 42.1GB/s
#   unset 0.0402s 106.8GB/s
#   unset kernel 0.1020s 42.1GB/s       <- after UNSET still remote: the mapping stays
#   unset kernel 0.1019s 42.2GB/s
#   fresh pf dev 0.0164s 262.3GB/s      <- a prefetch of pages never touched (zero-filled there)
#   resident kernel 0.0052s 824.1GB/s
#   cpu write 1.6230s 2.6GB/s
#   cpu-written kernel 0.6815s 6.3GB/s
#   cpu write 1.7296s 2.5GB/s
#   cpu-written pf dev 0.0946s 45.4GB/s
import ctypes as C,time,cupy as cp
cu=C.CDLL('libcuda.so.1');lc=C.CDLL(None);lc.memset.restype=C.c_void_p
cp.zeros(1);S=cp.cuda.Device().synchronize
N=4<<30
class L(C.Structure):_fields_=[('t',C.c_int),('i',C.c_int)]
D=L(1,0);H=L(2,0)
def ck(r,w):
 if r:raise RuntimeError(w+' rc=%d'%r)
def al():
 p=C.c_uint64();ck(cu.cuMemAllocManaged(C.byref(p),C.c_size_t(N),1),'alloc');return p.value
def ar(p):return cp.ndarray((N//4,),cp.float32,cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(p,N,p,0),0))
def tm(f):
 S();t=time.perf_counter();f();S();return time.perf_counter()-t
def pf(p,l):ck(cu.cuMemPrefetchAsync_v2(C.c_uint64(p),C.c_size_t(N),l,0,None),'pf')
def av(p,a,l):ck(cu.cuMemAdvise_v2(C.c_uint64(p),C.c_size_t(N),a,l),'adv')
def hw(p):lc.memset(C.c_void_p(p),1,C.c_size_t(N))
def k(x):x+=1
def m(n,f):
 try:t=tm(f);print(n,'%.4fs %.1fGB/s'%(t,N/t/1e9),flush=True)
 except Exception as e:print(n,'ERR',repr(e),flush=True)
p=al();a=ar(p);K=lambda:k(a)
m('fresh kernel',K)
m('resident kernel',K)
m('pf host',lambda:pf(p,H))
m('host-data kernel',K)
m('pf host',lambda:pf(p,H))
m('pf dev',lambda:pf(p,D))
m('resident kernel',K)
m('adv cpu',lambda:av(p,3,H))
m('adv cpu+pf host',lambda:pf(p,H))
m('cpu-pref kernel',K)
m('cpu-pref kernel',K)
m('unset',lambda:av(p,4,H))
m('unset kernel',K)
m('unset kernel',K)
q=al();b=ar(q)
m('fresh pf dev',lambda:pf(q,D))
m('resident kernel',lambda:k(b))
s=al();c=ar(s)
m('cpu write',lambda:hw(s))
m('cpu-written kernel',lambda:k(c))
s=al()
m('cpu write',lambda:hw(s))
m('cpu-written pf dev',lambda:pf(s,D))
