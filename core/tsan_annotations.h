#pragma once
// Happens-before edges ThreadSanitizer cannot see on its own. libgomp is not instrumented: the fork of
// a `#pragma omp parallel` region (handing the region to the pool's threads) and its join (the barrier
// at its end) go through libgomp's own futexes and atomics, so TSan would report every value a team
// thread reads that the forking thread wrote before the region, and every value the forking thread
// reads after the join that a team thread wrote. Where kiln hands data across such a region it says
// what the fork and join already guarantee:
//
//   KILN_TSAN_RELEASE(&state);            // before the region: the fork
//   #pragma omp parallel
//   {
//     KILN_TSAN_ACQUIRE(&state);          // first thing in each thread's part
//     ...
//     KILN_TSAN_RELEASE(&state);          // last thing in each thread's part
//   }
//   KILN_TSAN_ACQUIRE(&state);            // after the region: the join
//
// The address only names the edge (any object the region shares). The region's own argument passing
// (the compiler stores the addresses of shared variables in a block on the forking thread's stack, and
// each team thread reads them on entry, before it can acquire anything) is libgomp's part of the fork:
// the function holding the region is KILN_TSAN_NOT_INSTRUMENTED (its outlined body inherits that), so
// it must hold nothing but the region and the annotations, and call out, KILN_TSAN_NOINLINE, to the
// instrumented code that does the work. Outside a -fsanitize=thread build the macros are nothing.
// docs/threads.md has the TSan program that relies on them.
#if defined(__SANITIZE_THREAD__)
#define KILN_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KILN_TSAN 1
#endif
#endif

#if defined(KILN_TSAN)
#include <sanitizer/tsan_interface.h>
#define KILN_TSAN_ACQUIRE(addr) __tsan_acquire(const_cast<void*>(static_cast<const volatile void*>(addr)))
#define KILN_TSAN_RELEASE(addr) __tsan_release(const_cast<void*>(static_cast<const volatile void*>(addr)))
#define KILN_TSAN_NOT_INSTRUMENTED __attribute__((no_sanitize("thread")))
#define KILN_TSAN_NOINLINE __attribute__((noinline))
#else
#define KILN_TSAN_ACQUIRE(addr) ((void)(addr))
#define KILN_TSAN_RELEASE(addr) ((void)(addr))
#define KILN_TSAN_NOT_INSTRUMENTED
#define KILN_TSAN_NOINLINE
#endif
