// core_bench: the workloads of tests/gpu/core.sh (compiled there with nvcc; not part of `make`).
//   core_bench MODE SECONDS [FIRST]      MODE: elementwise | matmul | graph | async | rate
// Prints "ips=<iterations per second> iters=N secs=S ips_first=<over the first FIRST seconds>"
// (rate: "p50_ns=... launches=N"). FIRST defaults to SECONDS.
// elementwise: c = a + b over 64 Mi floats, synchronized every iteration (many blocks, short);
// matmul: a tiled 4096x4096 fp32 product (a few thousand blocks, milliseconds each);
// graph: 8 elementwise kernels captured once into a CUDA graph and replayed;
// async: the matmul, synchronized only every 64 launches (about a second of work queued at once,
// as an unsynchronized training loop queues it); iterations count when a synchronization
// has seen them complete.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "core_bench: %s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

__global__ void add(const float *a, const float *b, float *c, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        c[i] = a[i] + b[i];
}

#define TILE 32
__global__ void matmul(const float *A, const float *B, float *C, int n)
{
    __shared__ float As[TILE][TILE], Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0;
    for (int t = 0; t < n / TILE; t++) {
        As[threadIdx.y][threadIdx.x] = A[row * n + t * TILE + threadIdx.x];
        Bs[threadIdx.y][threadIdx.x] = B[(t * TILE + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    C[row * n + col] = acc;
}

__global__ void empty(void) {}

static double now(void)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: core_bench elementwise|matmul|graph|async|rate SECONDS [FIRST]\n");
        return 2;
    }
    const char *mode = argv[1];
    double secs = atof(argv[2]);
    double first = argc > 3 ? atof(argv[3]) : secs;
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (!strcmp(mode, "rate")) {
        std::vector<double> lat;
        double t0 = now();
        while (now() - t0 < secs) {
            double a = now();
            empty<<<1, 32, 0, s>>>();
            lat.push_back(now() - a);
            if (lat.size() % 256 == 0)
                CK(cudaStreamSynchronize(s));
        }
        std::nth_element(lat.begin(), lat.begin() + lat.size() / 2, lat.end());
        printf("p50_ns=%.0f launches=%zu\n", lat[lat.size() / 2] * 1e9, lat.size());
        return 0;
    }
    const size_t n = 64u << 20;
    const int N = 4096;
    float *a, *b, *c;
    size_t bytes = std::max(n, (size_t)N * N) * sizeof(float);
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMalloc(&c, bytes));
    CK(cudaMemset(a, 0, bytes));
    CK(cudaMemset(b, 0, bytes));
    cudaGraphExec_t exec = nullptr;
    if (!strcmp(mode, "graph")) {
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        for (int i = 0; i < 8; i++)
            add<<<4096, 256, 0, s>>>(a, b, c, n);
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&exec, g, 0));
    }
    long iters = 0, iters_first = -1;
    double t0 = now();
    bool async = !strcmp(mode, "async");
    long queued = 0;
    while (now() - t0 < secs) {
        if (iters_first < 0 && now() - t0 >= first)
            iters_first = iters;
        if (async) {
            matmul<<<dim3(N / TILE, N / TILE), dim3(TILE, TILE), 0, s>>>(a, b, c, N);
            if (++queued % 64 == 0) {
                CK(cudaStreamSynchronize(s));
                iters = queued;
            }
            continue;
        }
        if (!strcmp(mode, "elementwise"))
            add<<<4096, 256, 0, s>>>(a, b, c, n);
        else if (!strcmp(mode, "matmul"))
            matmul<<<dim3(N / TILE, N / TILE), dim3(TILE, TILE), 0, s>>>(a, b, c, N);
        else if (exec)
            CK(cudaGraphLaunch(exec, s));
        else {
            fprintf(stderr, "core_bench: unknown mode %s\n", mode);
            return 2;
        }
        CK(cudaStreamSynchronize(s));
        iters++;
    }
    if (async) {
        CK(cudaStreamSynchronize(s));
        iters = queued;
    }
    double el = now() - t0;
    if (iters_first < 0) {
        iters_first = iters;
        first = el;
    }
    printf("ips=%.2f iters=%ld secs=%.2f ips_first=%.2f\n", iters / el, iters, el, iters_first / first);
    return 0;
}
