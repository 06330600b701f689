// Round trip of one cache line between two CPUs (default 0 and 1): two
// pinned threads hand a counter back and forth; prints nanoseconds per
// round trip. docs/benchmarks.md (DPDK, net_null) says what it was for.
//   cc -O2 -pthread -o /tmp/c2c tests/bench/c2c_latency.c && /tmp/c2c 0 1
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Alignas(64) _Atomic long ball;
static long rounds = 2000000;

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *other(void *arg) {
    pin((int)(long)arg);
    for (long i = 0; i < rounds; i++) {
        while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * i + 1) {}
        atomic_store_explicit(&ball, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int a = argc > 1 ? atoi(argv[1]) : 0, b = argc > 2 ? atoi(argv[2]) : 1;
    pthread_t t;
    pthread_create(&t, NULL, other, (void *)(long)b);
    pin(a);
    struct timespec s, e;
    clock_gettime(CLOCK_MONOTONIC, &s);
    for (long i = 0; i < rounds; i++) {
        atomic_store_explicit(&ball, 2 * i + 1, memory_order_release);
        while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * i + 2) {}
    }
    clock_gettime(CLOCK_MONOTONIC, &e);
    pthread_join(t, NULL);
    printf("%.0f\n", ((e.tv_sec - s.tv_sec) * 1e9 + (e.tv_nsec - s.tv_nsec)) / rounds);
    return 0;
}
