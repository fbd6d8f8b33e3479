"""PyTorch on the GPU, the same workloads as bench/bench_cuda.cpp: add and the 8-op chain on 2^26 float32
(eager and torch.compile), a device-to-device copy, the launch cost of a one-element add, and a square
float32 matmul. Prints one `name ms` line each (medians of CUDA-event timings)."""
import statistics
import time

import torch

N = 1 << 26
dev = "cuda"


def chain(x):
    y = x * 1.5
    y = y + 0.25
    y = torch.relu(y)
    y = torch.exp(-y)
    y = torch.sigmoid(y)
    y = y - x
    return torch.tanh(y)


def median_ms(fn, reps=30):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def main():
    torch.backends.cuda.matmul.allow_tf32 = False  # kiln's float32 matmul is full float32
    a, b = torch.rand(N, device=dev), torch.rand(N, device=dev)
    out = torch.empty(N, device=dev)
    print(f"torch_add_2^26 {median_ms(lambda: a + b):.4f}")
    print(f"torch_chain8_eager_2^26 {median_ms(lambda: chain(a)):.4f}")
    compiled = torch.compile(chain)
    print(f"torch_chain8_compile_2^26 {median_ms(lambda: compiled(a)):.4f}")
    print(f"torch_copy_dtod_2^26 {median_ms(lambda: out.copy_(a)):.4f}")
    one, two = torch.ones(1, device=dev), torch.ones(1, device=dev)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10000):
        one + two
    host_us = (time.perf_counter() - t0) / 10000 * 1e6
    torch.cuda.synchronize()
    print(f"torch_launch_overhead_us {host_us:.2f}")
    for n in (1024, 4096):
        x, y = torch.rand(n, n, device=dev), torch.rand(n, n, device=dev)
        ms = median_ms(lambda: x @ y)
        print(f"torch_matmul_{n} {ms:.4f} ({2 * n ** 3 / ms / 1e9:.1f} TFLOP/s)")


if __name__ == "__main__":
    main()
