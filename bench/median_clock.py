"""The PyTorch side's clock for the side-by-side benches, as bench/median_ms.h is kiln's: the median of repeated
runs in milliseconds, in wall time or, after use_cpu_time(), this thread's CPU time (which a loaded machine
inflates far less; valid at 1 thread)."""
import statistics
import time

_clock = time.perf_counter


def use_cpu_time():
    global _clock
    _clock = time.thread_time


def median_ms(warmup, reps, fn):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = _clock()
        fn()
        times.append((_clock() - t0) * 1e3)
    return statistics.median(times)
