/*
 * The C test of the sigretire C ABI: compiled with the system's C compiler
 * against include/sigretire.h and the built library, it runs the
 * repository README's 64-fence example on the simulator (one load retires
 * 64 uses), a hold/pin scenario across two queues, a consumer's tracker
 * destroyed while its packet waits on a pinned signal, the timestamps of a
 * held use and of an unprofiled one, the wait policies, back-pressure, a
 * runtime's own packets written by hand, backend hooks implemented here in
 * C, threads waiting (with the blocking and the hybrid policy) while
 * another submits, and bad input. It exits 1 on any wrong answer. It
 * also runs clean under AddressSanitizer (gcc -fsanitize=address, with
 * the library built with -Zsanitizer=address).
 *
 * -DPLANT_WRONG_ANSWER makes it expect a wrong value (two loads for the 64
 * fences instead of one), so a build can show the program does fail when
 * an answer is wrong.
 */

#include "sigretire.h"
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PLANT_WRONG_ANSWER
#define EXPECTED_FENCE_LOADS 2 /* wrong on purpose */
#else
#define EXPECTED_FENCE_LOADS 1
#endif

/* Every struct passed to the library carries its size, set first. */
#define SIZED(type) {.size = sizeof(struct type)}

/* HSA packet types (hsa.h), for packets this program writes itself. */
#define PACKET_TYPE_KERNEL_DISPATCH 2
#define PACKET_TYPE_BARRIER_AND 3

static struct sigretire_work kernel_work(void) {
    struct sigretire_work work = SIZED(sigretire_work); /* the rest zeroed */
    work.kind = SIGRETIRE_WORK_KERNEL;
    work.kernel_object = 0; /* the simulator's empty kernel */
    return work;
}

static struct sigretire_request fence_request(uint32_t purpose) {
    struct sigretire_request request = SIZED(sigretire_request);
    request.flags = SIGRETIRE_REQUEST_BARRIER;
    request.purpose = purpose;
    return request;
}

/* The README's example: 64 kernels with the barrier bit, device-memory
 * signals; once the GPU ran them, one poll retires all 64 with one load. */
static void sixty_four_fences(void) {
    struct sigretire_sim *sim = NULL;
    struct sigretire_tracker *tracker = NULL;
    struct sigretire_config config = SIZED(sigretire_config);
    struct sigretire_ticket tickets[64];
    struct sigretire_stats stats = SIZED(sigretire_stats);
    struct sigretire_census census = SIZED(sigretire_census);
    size_t rearmed = 0;
    uint64_t violations = 1;
    int i;

    CHECK_OK(sigretire_sim_create(NULL, &sim));
    CHECK_OK(sigretire_config_default(&config));
    config.signals = SIGRETIRE_PLACEMENT_DEVICE;
    CHECK_OK(sigretire_sim_tracker_create(sim, 0, &config, &tracker));
    for (i = 0; i < 64; i++) {
        struct sigretire_request request = fence_request(SIGRETIRE_PURPOSE_COMPLETION);
        struct sigretire_work work = kernel_work();
        struct sigretire_acquired acquired = SIZED(sigretire_acquired);
        CHECK_OK(sigretire_tracker_submit(tracker, &request, &work, &acquired));
        CHECK(acquired.flags & SIGRETIRE_ACQUIRED_BARRIER);
        CHECK(acquired.placement == SIGRETIRE_PLACEMENT_DEVICE);
        tickets[i] = acquired.ticket;
    }
    CHECK_OK(sigretire_sim_run_until_idle(sim)); /* the simulated GPU runs everything */
    CHECK_OK(sigretire_tracker_poll(tracker, &rearmed)); /* one PCIe load of the newest fence... */
    CHECK_OK(sigretire_tracker_stats(tracker, &stats));
    CHECK(stats.device.loads == EXPECTED_FENCE_LOADS);
    CHECK(stats.retired == 64);
    CHECK(stats.retired_by_fence == 64 && stats.probes == 1); /* no load of their own */
    for (i = 0; i < 64; i++) { /* ...retires all 64, answered from host memory */
        sigretire_use_status status = SIGRETIRE_USE_UNKNOWN;
        CHECK_OK(sigretire_tracker_known_status(tracker, &tickets[i], &status));
        CHECK(status == SIGRETIRE_USE_COMPLETE);
    }
    CHECK_OK(sigretire_tracker_stats(tracker, &stats));
    CHECK(stats.device.loads == EXPECTED_FENCE_LOADS);
    CHECK(rearmed == 64);
    CHECK_OK(sigretire_tracker_census(tracker, &census));
    CHECK(census.in_flight + census.armed + census.parked + census.retired == census.created);
    CHECK_OK(sigretire_sim_violations(sim, &violations));
    CHECK(violations == 0);
    CHECK_OK(sigretire_tracker_destroy(&tracker));
    CHECK(tracker == NULL);
    CHECK_OK(sigretire_sim_destroy(&sim));
    CHECK(sim == NULL);
}

/* A runtime that writes its own packets: acquire gives the completion
 * signal and the header bits; the packet is written into the (simulated)
 * ring by hand, header last, and the doorbell rung. */
static void a_packet_written_by_hand(void) {
    struct sigretire_sim *sim = NULL;
    struct sigretire_tracker *tracker = NULL;
    struct sigretire_request request = fence_request(SIGRETIRE_PURPOSE_CPU_SYNC);
    struct sigretire_acquired acquired = SIZED(sigretire_acquired);
    uint32_t words[16];
    sigretire_use_status status = SIGRETIRE_USE_UNKNOWN;
    bool completed = false;
    uint64_t index = 0, violations = 1;

    CHECK_OK(sigretire_sim_create(NULL, &sim));
    CHECK_OK(sigretire_sim_tracker_create(sim, 0, NULL, &tracker));
    CHECK_OK(sigretire_sim_reserve(sim, 0, &index));
    request.aql_index = index;
    CHECK_OK(sigretire_tracker_acquire(tracker, &request, &acquired));
    CHECK(acquired.aql_index == index && acquired.ops == 1);
    CHECK(acquired.completion_signal != 0);
    CHECK((acquired.header >> 8 & 1) == 1); /* the barrier bit, as recorded */

    /* A barrier-AND packet: no dependencies, the tracker's signal. */
    memset(words, 0, sizeof words);
    words[0] = (uint32_t)(acquired.header | PACKET_TYPE_BARRIER_AND);
    words[14] = (uint32_t)acquired.completion_signal;
    words[15] = (uint32_t)(acquired.completion_signal >> 32);
    CHECK_OK(sigretire_sim_write_packet(sim, 0, index, words));
    CHECK_OK(sigretire_sim_ring_doorbell(sim, 0, index));

    CHECK_OK(sigretire_tracker_query(tracker, &acquired.ticket, &status));
    CHECK(status == SIGRETIRE_USE_PENDING);
    CHECK_OK(sigretire_sim_run_until_idle(sim));
    CHECK_OK(sigretire_sim_packet_completed(sim, 0, index, &completed));
    CHECK(completed);
    CHECK_OK(sigretire_tracker_query(tracker, &acquired.ticket, &status));
    CHECK(status == SIGRETIRE_USE_COMPLETE);
    CHECK_OK(sigretire_sim_violations(sim, &violations));
    CHECK(violations == 0);
    CHECK_OK(sigretire_tracker_destroy(&tracker));
    CHECK_OK(sigretire_sim_destroy(&sim));
}

/* An event holds a use and a GPU waiter on another queue pins it: the
 * retired signal is parked, not re-armed, until both let go. */
static void hold_and_pin(void) {
    struct sigretire_sim_options options = SIZED(sigretire_sim_options);
    struct sigretire_sim *sim = NULL;
    struct sigretire_tracker *producer = NULL, *consumer = NULL;
    struct sigretire_request request = fence_request(SIGRETIRE_PURPOSE_GPU_WAITER);
    struct sigretire_work work = kernel_work();
    struct sigretire_acquired produced = SIZED(sigretire_acquired),
                              consumed = SIZED(sigretire_acquired);
    struct sigretire_hold *hold = NULL;
    struct sigretire_pin *pin = NULL;
    struct sigretire_census census = SIZED(sigretire_census);
    struct sigretire_stats stats = SIZED(sigretire_stats);
    sigretire_use_status status = SIGRETIRE_USE_UNKNOWN;
    uint64_t handle = 0, index = 0, violations = 1;
    size_t rearmed = 0;
    bool completed = true;

    CHECK_OK(sigretire_sim_options_default(&options));
    options.queues = 2;
    CHECK_OK(sigretire_sim_create(&options, &sim));
    CHECK_OK(sigretire_sim_tracker_create(sim, 0, NULL, &producer));
    CHECK_OK(sigretire_sim_tracker_create(sim, 1, NULL, &consumer));

    /* The producer's packet, held by an event and pinned for a waiter. */
    CHECK_OK(sigretire_tracker_submit(producer, &request, &work, &produced));
    CHECK_OK(sigretire_tracker_hold(producer, &produced.ticket, &hold));
    CHECK(hold != NULL);
    CHECK_OK(sigretire_tracker_pin(producer, &produced.ticket, &pin));
    CHECK(pin != NULL);
    CHECK_OK(sigretire_pin_packet_handle(pin, &handle));
    CHECK(handle == produced.completion_signal);

    /* The consumer queue's barrier-AND waits on the pinned signal. */
    CHECK_OK(sigretire_tracker_reserve(consumer, &index));
    request = fence_request(SIGRETIRE_PURPOSE_COMPLETION);
    request.aql_index = index;
    CHECK_OK(sigretire_tracker_acquire(consumer, &request, &consumed));
    memset(&work, 0, sizeof work);
    work.size = sizeof work;
    work.kind = SIGRETIRE_WORK_WAIT_ALL;
    work.dependency_count = 1;
    work.dependencies[0] = handle;
    CHECK_OK(sigretire_tracker_publish(consumer, &consumed.ticket, 0, &work));
    CHECK_OK(sigretire_tracker_attach(consumer, &consumed.ticket, &pin));
    CHECK(pin == NULL); /* the consumer's tracker owns it now */
    CHECK_OK(sigretire_sim_packet_completed(sim, 1, index, &completed));
    CHECK(!completed);

    CHECK_OK(sigretire_sim_run_until_idle(sim)); /* both queues run */
    CHECK_OK(sigretire_sim_packet_completed(sim, 1, index, &completed));
    CHECK(completed);
    CHECK_OK(sigretire_hold_status(hold, &status));
    CHECK(status == SIGRETIRE_USE_COMPLETE);

    /* Retired, but held and pinned: parked, a spare took its slot. */
    CHECK_OK(sigretire_tracker_poll(producer, &rearmed));
    CHECK_OK(sigretire_tracker_census(producer, &census));
    CHECK(census.parked == 1);
    CHECK_OK(sigretire_hold_release(&hold));
    CHECK(hold == NULL);
    CHECK_OK(sigretire_tracker_reclaim(producer, &rearmed));
    CHECK_OK(sigretire_tracker_census(producer, &census));
    CHECK(census.parked == 1); /* the consumer's pin still holds it */

    /* The consumer retires: its tracker lets go of the pin. */
    CHECK_OK(sigretire_tracker_poll(consumer, &rearmed));
    CHECK_OK(sigretire_tracker_census(consumer, &census));
    CHECK(census.pins == 0);
    CHECK_OK(sigretire_tracker_reclaim(producer, &rearmed));
    CHECK_OK(sigretire_tracker_census(producer, &census));
    CHECK(census.parked == 0);
    CHECK(census.in_flight + census.armed + census.parked + census.retired == census.created);
    CHECK_OK(sigretire_tracker_stats(producer, &stats));
    CHECK(stats.parks == 1 && stats.unparks == 1 && stats.pins == 1);

    /* A use known complete needs no pin and no dependency. */
    CHECK_OK(sigretire_tracker_pin(producer, &produced.ticket, &pin));
    CHECK(pin == NULL);
    CHECK_OK(sigretire_tracker_hold(producer, &produced.ticket, &hold));
    CHECK(hold == NULL);

    CHECK_OK(sigretire_sim_violations(sim, &violations));
    CHECK(violations == 0);
    CHECK_OK(sigretire_tracker_destroy(&consumer));
    CHECK_OK(sigretire_tracker_destroy(&producer));
    CHECK_OK(sigretire_sim_destroy(&sim));
}

/* A consumer queue's tracker destroyed while its packet still waits on a
 * pinned signal: the producer keeps the signal parked until that packet
 * ran, and the simulator sees no re-arm under the waiter. */
static void destroying_a_consumer_keeps_its_pins(void) {
    struct sigretire_sim_options options = SIZED(sigretire_sim_options);
    struct sigretire_sim *sim = NULL;
    struct sigretire_tracker *producer = NULL, *consumer = NULL;
    struct sigretire_request request = fence_request(SIGRETIRE_PURPOSE_GPU_WAITER);
    struct sigretire_work work = kernel_work(), wait = SIZED(sigretire_work),
                          marker = SIZED(sigretire_work);
    struct sigretire_acquired produced = SIZED(sigretire_acquired),
                              blocker = SIZED(sigretire_acquired),
                              consumed = SIZED(sigretire_acquired);
    struct sigretire_pin *pin = NULL;
    struct sigretire_census census = SIZED(sigretire_census);
    uint64_t handle = 0, index = 0, violations = 1;
    size_t rearmed = 0;
    bool completed = true;

    CHECK_OK(sigretire_sim_options_default(&options));
    options.queues = 2;
    CHECK_OK(sigretire_sim_create(&options, &sim));
    CHECK_OK(sigretire_sim_tracker_create(sim, 0, NULL, &producer));
    CHECK_OK(sigretire_sim_tracker_create(sim, 1, NULL, &consumer));
    CHECK_OK(sigretire_tracker_submit(producer, &request, &work, &produced));
    /* A later use whose packet is not written yet holds the consumer back. */
    CHECK_OK(sigretire_tracker_reserve(producer, &index));
    request.aql_index = index;
    CHECK_OK(sigretire_tracker_acquire(producer, &request, &blocker));
    CHECK_OK(sigretire_tracker_pin(producer, &produced.ticket, &pin));
    CHECK_OK(sigretire_pin_packet_handle(pin, &handle));

    memset(&wait, 0, sizeof wait);
    wait.size = sizeof wait;
    wait.kind = SIGRETIRE_WORK_WAIT_ALL;
    wait.dependency_count = 2;
    wait.dependencies[0] = handle;
    wait.dependencies[1] = blocker.completion_signal;
    request = fence_request(SIGRETIRE_PURPOSE_COMPLETION);
    CHECK_OK(sigretire_tracker_submit(consumer, &request, &wait, &consumed));
    CHECK_OK(sigretire_tracker_attach(consumer, &consumed.ticket, &pin));
    CHECK_OK(sigretire_tracker_destroy(&consumer)); /* its packet still waits */

    CHECK_OK(sigretire_sim_run_until_idle(sim));
    CHECK_OK(sigretire_sim_packet_completed(sim, 1, consumed.aql_index, &completed));
    CHECK(!completed);
    CHECK_OK(sigretire_tracker_poll(producer, &rearmed));
    CHECK_OK(sigretire_sim_violations(sim, &violations));
    CHECK(violations == 0);
    CHECK_OK(sigretire_tracker_census(producer, &census));
    CHECK(census.parked == 1); /* not re-armed under the waiter */

    memset(&marker, 0, sizeof marker);
    marker.size = sizeof marker;
    marker.kind = SIGRETIRE_WORK_MARKER;
    CHECK_OK(sigretire_tracker_publish(producer, &blocker.ticket, 0, &marker));
    CHECK_OK(sigretire_sim_run_until_idle(sim));
    CHECK_OK(sigretire_sim_packet_completed(sim, 1, consumed.aql_index, &completed));
    CHECK(completed);
    CHECK_OK(sigretire_tracker_poll(producer, &rearmed));
    CHECK_OK(sigretire_tracker_census(producer, &census));
    CHECK(census.parked == 0); /* the consumer's packet ran: let go */
    CHECK_OK(sigretire_sim_violations(sim, &violations));
    CHECK(violations == 0);
    CHECK_OK(sigretire_tracker_destroy(&producer));
    CHECK_OK(sigretire_sim_destroy(&sim));
}

/* A held use keeps answering its stamps by its ticket, however many uses
 * later; a timed use on a queue without profiling says it has none. */
static void timestamps(void) {
    struct sigretire_sim_options options = SIZED(sigretire_sim_options);
    struct sigretire_sim *sim = NULL;
    struct sigretire_tracker *tracker = NULL;
    struct sigretire_config config = SIZED(sigretire_config);
    struct sigretire_request request = fence_request(SIGRETIRE_PURPOSE_EVENT);
    struct sigretire_work work = SIZED(sigretire_work);
    struct sigretire_acquired timed = SIZED(sigretire_acquired),
                              later = SIZED(sigretire_acquired);
    struct sigretire_timestamps stamps = SIZED(sigretire_timestamps),
                                held = SIZED(sigretire_timestamps);
    struct sigretire_hold *hold = NULL;
    size_t rearmed = 0;
    int i;

    memset(&work, 0, sizeof work);
    work.size = sizeof work;
    work.kind = SIGRETIRE_WORK_EMPTY;
    request.flags |= SIGRETIRE_REQUEST_TIMED;
    CHECK_OK(sigretire_sim_create(NULL, &sim));
    CHECK_OK(sigretire_config_default(&config));
    config.initial_size = 4;
    config.growth_limit = 1;
    CHECK_OK(sigretire_sim_tracker_create(sim, 0, &config, &tracker));
    CHECK_OK(sigretire_tracker_submit(tracker, &request, &work, &timed));
    CHECK_OK(sigretire_tracker_hold(tracker, &timed.ticket, &hold));
    for (i = 0; i < 12; i++) {
        CHECK_OK(sigretire_sim_run_until_idle(sim));
        CHECK_OK(sigretire_tracker_submit(tracker, &request, &work, &later));
        CHECK_OK(sigretire_tracker_poll(tracker, &rearmed));
    }
    CHECK_OK(sigretire_tracker_timestamps(tracker, &timed.ticket, &stamps));
    CHECK_OK(sigretire_hold_timestamps(hold, &held));
    CHECK(stamps.state == SIGRETIRE_TIMESTAMPS_AVAILABLE && stamps.end > stamps.start);
    CHECK(held.state == stamps.state && held.start == stamps.start && held.end == stamps.end);
    CHECK_OK(sigretire_hold_release(&hold));
    CHECK_OK(sigretire_sim_run_until_idle(sim));
    CHECK_OK(sigretire_tracker_destroy(&tracker));
    CHECK_OK(sigretire_sim_destroy(&sim));

    CHECK_OK(sigretire_sim_options_default(&options));
    options.flags |= SIGRETIRE_SIM_UNPROFILED;
    CHECK_OK(sigretire_sim_create(&options, &sim));
    CHECK_OK(sigretire_sim_tracker_create(sim, 0, NULL, &tracker));
    CHECK_OK(sigretire_tracker_submit(tracker, &request, &work, &timed));
    CHECK_OK(sigretire_tracker_timestamps(tracker, &timed.ticket, &stamps));
    CHECK(stamps.state == SIGRETIRE_TIMESTAMPS_NONE); /* pending */
    CHECK_OK(sigretire_sim_run_until_idle(sim));
    CHECK_OK(sigretire_tracker_timestamps(tracker, &timed.ticket, &stamps));
    CHECK(stamps.state == SIGRETIRE_TIMESTAMPS_UNSTAMPED); /* complete, never stamped */
    CHECK(stamps.start == 0 && stamps.end == 0);
    CHECK_OK(sigretire_tracker_destroy(&tracker));
    CHECK_OK(sigretire_sim_destroy(&sim));
}

/* A full ring answers with the use to wait for, never blocks. */
static void back_pressure(void) {
    struct sigretire_sim *sim = NULL;
    struct sigretire_tracker *tracker = NULL;
    struct sigretire_config config = SIZED(sigretire_config);
    struct sigretire_request request = fence_request(SIGRETIRE_PURPOSE_COMPLETION);
    struct sigretire_work work = kernel_work();
    struct sigretire_acquired acquired = SIZED(sigretire_acquired);
    sigretire_use_status status = SIGRETIRE_USE_UNKNOWN;
    int i;

    CHECK_OK(sigretire_sim_create(NULL, &sim));
    CHECK_OK(sigretire_config_default(&config));
    config.initial_size = 4;
    config.growth_limit = 1;
    CHECK_OK(sigretire_sim_tracker_create(sim, 0, &config, &tracker));
    for (i = 0; i < 4; i++) {
        CHECK_OK(sigretire_tracker_submit(tracker, &request, &work, &acquired));
    }
    CHECK_STATUS(sigretire_tracker_submit(tracker, &request, &work, &acquired),
                 SIGRETIRE_ERR_BACKPRESSURE);
    CHECK(acquired.wait_for.seq >= 1 && acquired.count == 4);
    CHECK_OK(sigretire_sim_run_until_idle(sim));
    CHECK_OK(sigretire_tracker_wait(tracker, &acquired.wait_for, 1000000000u, NULL, &status));
    CHECK(status == SIGRETIRE_USE_COMPLETE);
    CHECK_OK(sigretire_tracker_submit(tracker, &request, &work, &acquired)); /* room again */
    CHECK_OK(sigretire_tracker_destroy(&tracker));
    CHECK_OK(sigretire_sim_destroy(&sim));
}

/* Threads wait (no tracker lock) while the main thread keeps submitting:
 * some with the blocking policy, some with the hybrid one (dozing until
 * shortly before the expected end, or the tracker's guess where none is
 * given). */
struct waiter_args {
    struct sigretire_tracker *tracker;
    struct sigretire_ticket ticket;
    int hybrid;                   /* 0: the blocking policy */
    uint64_t expected_ns;         /* the hybrid policy's guess; 0: learned */
    sigretire_status policy_result;
    sigretire_status result;
    sigretire_use_status status;
};

static void *wait_for_ticket(void *arg) {
    struct waiter_args *args = arg;
    struct sigretire_wait_policy policy = SIZED(sigretire_wait_policy);
    if (args->hybrid) {
        args->policy_result = sigretire_wait_policy_hybrid(&policy, args->expected_ns);
    } else {
        args->policy_result = sigretire_wait_policy_blocking(&policy);
    }
    args->result =
        sigretire_tracker_wait(args->tracker, &args->ticket, 10000000000u, &policy, &args->status);
    return NULL;
}

static void waits_on_other_threads(void) {
    struct sigretire_sim *sim = NULL;
    struct sigretire_tracker *tracker = NULL;
    struct sigretire_request request = fence_request(SIGRETIRE_PURPOSE_CPU_SYNC);
    struct sigretire_work work = kernel_work();
    struct sigretire_acquired acquired = SIZED(sigretire_acquired);
    struct waiter_args args[4];
    pthread_t threads[4];
    int i;

    CHECK_OK(sigretire_sim_create(NULL, &sim));
    CHECK_OK(sigretire_sim_tracker_create(sim, 0, NULL, &tracker));
    for (i = 0; i < 4; i++) {
        CHECK_OK(sigretire_tracker_submit(tracker, &request, &work, &acquired));
        args[i].tracker = tracker;
        args[i].ticket = acquired.ticket;
        args[i].hybrid = i >= 2;                      /* threads 2 and 3 */
        args[i].expected_ns = i == 3 ? 2000000u : 0u; /* 2 ms; learned */
        args[i].policy_result = SIGRETIRE_ERR_PANIC;
        args[i].result = SIGRETIRE_ERR_PANIC;
        args[i].status = SIGRETIRE_USE_UNKNOWN;
        CHECK(pthread_create(&threads[i], NULL, wait_for_ticket, &args[i]) == 0);
    }
    for (i = 0; i < 16; i++) { /* submitting goes on while they wait */
        CHECK_OK(sigretire_tracker_submit(tracker, &request, &work, &acquired));
    }
    CHECK_OK(sigretire_sim_run_until_idle(sim));
    for (i = 0; i < 4; i++) {
        CHECK(pthread_join(threads[i], NULL) == 0);
        CHECK(args[i].policy_result == SIGRETIRE_OK);
        CHECK(args[i].result == SIGRETIRE_OK);
        CHECK(args[i].status == SIGRETIRE_USE_COMPLETE);
    }
    CHECK_OK(sigretire_tracker_destroy(&tracker));
    CHECK_OK(sigretire_sim_destroy(&sim));
}

/* Backend hooks: a runtime's own signal memory (host atomics here) and its
 * own queue (a read index this program moves as its "GPU" runs). */
#define HOOK_SIGNALS 256

struct runtime_memory {
    _Atomic int64_t values[HOOK_SIGNALS];
    size_t next;
    pthread_mutex_t lock;
    atomic_int fences, flushes, releases;
};

struct runtime_queue {
    _Atomic uint64_t read_index;
};

static int32_t hook_allocate(void *user, size_t count, uint32_t placement, uint64_t *signals,
                             uint32_t *placements) {
    struct runtime_memory *memory = user;
    size_t i;
    int32_t result = 0;
    (void)placement; /* host memory only: say so */
    pthread_mutex_lock(&memory->lock);
    if (memory->next + count > HOOK_SIGNALS) {
        result = 1;
    } else {
        for (i = 0; i < count; i++) {
            signals[i] = (uint64_t)(memory->next + i + 1); /* 0 names no signal */
            placements[i] = SIGRETIRE_PLACEMENT_HOST;
        }
        memory->next += count;
    }
    pthread_mutex_unlock(&memory->lock);
    return result;
}

static int64_t hook_load(void *user, uint64_t signal) {
    struct runtime_memory *memory = user;
    return atomic_load_explicit(&memory->values[signal - 1], memory_order_acquire);
}

static void hook_store(void *user, uint64_t signal, int64_t value) {
    struct runtime_memory *memory = user;
    atomic_store_explicit(&memory->values[signal - 1], value, memory_order_release);
}

static void hook_store_fence(void *user) {
    struct runtime_memory *memory = user;
    atomic_thread_fence(memory_order_seq_cst);
    atomic_fetch_add(&memory->fences, 1);
}

static void hook_hdp_flush(void *user) {
    struct runtime_memory *memory = user;
    atomic_fetch_add(&memory->flushes, 1);
}

static void hook_release(void *user) {
    struct runtime_memory *memory = user;
    atomic_fetch_add(&memory->releases, 1);
}

static uint64_t hook_read_index(void *queue_user) {
    struct runtime_queue *queue = queue_user;
    return atomic_load_explicit(&queue->read_index, memory_order_acquire);
}

static uint32_t hook_ring_placement(void *queue_user) {
    (void)queue_user;
    return SIGRETIRE_PLACEMENT_DEVICE;
}

static void hooks_over_a_runtimes_own_memory(void) {
    static struct runtime_memory memory;
    static struct runtime_queue queue;
    struct sigretire_hooks hooks = SIZED(sigretire_hooks);
    struct sigretire_tracker *tracker = NULL;
    struct sigretire_acquired acquired[8];
    struct sigretire_stats stats = SIZED(sigretire_stats);
    struct sigretire_work work = kernel_work();
    size_t rearmed = 0;
    uint64_t index = 0;
    int i;

    memset(&hooks, 0, sizeof hooks);
    hooks.size = sizeof hooks;
    pthread_mutex_init(&memory.lock, NULL);
    hooks.user = &memory;
    hooks.allocate = hook_allocate;
    hooks.load = hook_load;
    hooks.store = hook_store;
    hooks.store_fence = hook_store_fence;
    hooks.hdp_flush = hook_hdp_flush;
    hooks.release = hook_release;
    hooks.queue_user = &queue;
    hooks.read_index = hook_read_index;
    hooks.ring_placement = hook_ring_placement;
    CHECK_OK(sigretire_hooks_tracker_create(&hooks, NULL, &tracker));
    CHECK(memory.next == 64); /* the initial ring, through the allocate hook */

    /* The runtime publishes on its own queue: the library refuses to. */
    CHECK_STATUS(sigretire_tracker_reserve(tracker, &index), SIGRETIRE_ERR_UNSUPPORTED);
    for (i = 0; i < 8; i++) {
        struct sigretire_request request = fence_request(SIGRETIRE_PURPOSE_COMPLETION);
        request.aql_index = (uint64_t)i;
        acquired[i].size = sizeof acquired[i];
        CHECK_OK(sigretire_tracker_acquire(tracker, &request, &acquired[i]));
        CHECK(hook_load(&memory, acquired[i].completion_signal) == 1); /* armed */
    }
    CHECK_STATUS(sigretire_tracker_publish(tracker, &acquired[0].ticket, 0, &work),
                 SIGRETIRE_ERR_UNSUPPORTED);

    /* The "GPU" runs the 8 packets in order: completes each signal, then
     * the read index passes them all. */
    for (i = 0; i < 8; i++) {
        atomic_fetch_sub_explicit(&memory.values[acquired[i].completion_signal - 1], 1,
                                  memory_order_release);
    }
    atomic_store_explicit(&queue.read_index, 8, memory_order_release);
    CHECK_OK(sigretire_tracker_poll(tracker, &rearmed));
    CHECK(rearmed == 8);
    CHECK_OK(sigretire_tracker_stats(tracker, &stats));
    CHECK(stats.host.loads == 1); /* one probe of the newest fence */
    CHECK(stats.retired == 8);
    for (i = 0; i < 8; i++) {
        sigretire_use_status status = SIGRETIRE_USE_UNKNOWN;
        CHECK_OK(sigretire_tracker_known_status(tracker, &acquired[i].ticket, &status));
        CHECK(status == SIGRETIRE_USE_COMPLETE);
        CHECK(hook_load(&memory, acquired[i].completion_signal) == 1); /* re-armed */
    }
    CHECK(atomic_load(&memory.releases) == 0);
    CHECK_OK(sigretire_tracker_destroy(&tracker));
    CHECK(atomic_load(&memory.releases) == 1); /* the memory went back to the runtime */
}

/* Bad input gets error codes, never a crash. */
static void bad_input(void) {
    struct sigretire_sim *sim = NULL;
    struct sigretire_tracker *one = NULL, *other = NULL;
    struct sigretire_request request = fence_request(SIGRETIRE_PURPOSE_COMPLETION);
    struct sigretire_work work = kernel_work();
    struct sigretire_acquired acquired = SIZED(sigretire_acquired);
    struct sigretire_ticket forged;
    struct sigretire_rocr *rocr = NULL;
    sigretire_use_status status = SIGRETIRE_USE_UNKNOWN;
    const char *name = NULL;
    char message[256];
    size_t length = 0;

    CHECK_OK(sigretire_sim_create(NULL, &sim));
    CHECK_OK(sigretire_sim_tracker_create(sim, 0, NULL, &one));
    CHECK_OK(sigretire_sim_tracker_create(sim, 0, NULL, &other));
    CHECK_OK(sigretire_tracker_submit(one, &request, &work, &acquired));

    CHECK_STATUS(sigretire_tracker_query(NULL, &acquired.ticket, &status), SIGRETIRE_ERR_NULL);
    CHECK_STATUS(sigretire_tracker_query(one, NULL, &status), SIGRETIRE_ERR_NULL);
    CHECK_STATUS(sigretire_tracker_query(one, &acquired.ticket, NULL), SIGRETIRE_ERR_NULL);
    CHECK(sigretire_last_error(message, sizeof message, &length) == SIGRETIRE_OK && length > 1);
    CHECK(strstr(message, "sigretire_tracker_query") != NULL);
    CHECK(length == strlen(message) + 1); /* the room it takes, its NUL included */
    { /* a size query, then a buffer of exactly that size takes the message */
        size_t needed = 0;
        char *copy = NULL;
        CHECK_STATUS(sigretire_last_error(NULL, 0, &needed), SIGRETIRE_ERR_BUFFER_TOO_SMALL);
        CHECK(needed == length);
        copy = malloc(needed);
        CHECK(copy != NULL);
        if (copy != NULL) {
            CHECK_OK(sigretire_last_error(copy, needed, &needed));
            CHECK(strcmp(copy, message) == 0);
            free(copy);
        }
    }
    CHECK_STATUS(sigretire_tracker_query(other, &acquired.ticket, &status),
                 SIGRETIRE_ERR_BAD_TICKET); /* another tracker's */
    forged = acquired.ticket;
    forged.seq += 1; /* a use never issued, or one whose check does not match */
    CHECK_STATUS(sigretire_tracker_query(one, &forged, &status), SIGRETIRE_ERR_BAD_TICKET);
    forged = acquired.ticket;
    forged.flags ^= SIGRETIRE_TICKET_TIMED;
    CHECK_STATUS(sigretire_tracker_wait(one, &forged, 0, NULL, &status), SIGRETIRE_ERR_BAD_TICKET);
    memset(&forged, 0, sizeof forged);
    CHECK_STATUS(sigretire_tracker_fail_submission(one, &forged, 0), SIGRETIRE_ERR_BAD_TICKET);
    request.purpose = 99;
    CHECK_STATUS(sigretire_tracker_submit(one, &request, &work, &acquired),
                 SIGRETIRE_ERR_INVALID_ARGUMENT);
    request.purpose = SIGRETIRE_PURPOSE_COMPLETION;
    work.kind = 42;
    CHECK_STATUS(sigretire_tracker_submit(one, &request, &work, &acquired),
                 SIGRETIRE_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(sigretire_sim_tracker_create(sim, 7, NULL, &other), SIGRETIRE_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(sigretire_status_name(SIGRETIRE_ERR_BAD_TICKET, &name), SIGRETIRE_OK);
    CHECK(name != NULL && strcmp(name, "SIGRETIRE_ERR_BAD_TICKET") == 0);
    CHECK_STATUS(sigretire_status_name(-5, &name), SIGRETIRE_ERR_INVALID_ARGUMENT);

    /* Handles of another kind, and a released one: refused, never read
     * (under AddressSanitizer a read past a hold or of a freed hold aborts). */
    {
        struct sigretire_hold *hold = NULL, *stale = NULL;
        struct sigretire_pin *pin = NULL;
        size_t rearmed = 0;
        request.purpose = SIGRETIRE_PURPOSE_EVENT;
        work = kernel_work();
        CHECK_OK(sigretire_tracker_submit(one, &request, &work, &acquired));
        CHECK_OK(sigretire_tracker_hold(one, &acquired.ticket, &hold));
        CHECK_OK(sigretire_tracker_pin(one, &acquired.ticket, &pin));
        CHECK(hold != NULL && pin != NULL);
        CHECK_STATUS(sigretire_tracker_poll((struct sigretire_tracker *)(void *)hold, &rearmed),
                     SIGRETIRE_ERR_BAD_HANDLE);
        CHECK_STATUS(sigretire_tracker_poll((struct sigretire_tracker *)(void *)pin, &rearmed),
                     SIGRETIRE_ERR_BAD_HANDLE);
        CHECK_STATUS(sigretire_hold_status((struct sigretire_hold *)(void *)pin, &status),
                     SIGRETIRE_ERR_BAD_HANDLE);
        stale = hold;
        CHECK_OK(sigretire_hold_release(&hold));
        CHECK_STATUS(sigretire_hold_status(stale, &status), SIGRETIRE_ERR_BAD_HANDLE);
        CHECK_OK(sigretire_pin_release(&pin));
        request.purpose = SIGRETIRE_PURPOSE_COMPLETION;
    }

    /* A struct whose size is unset or another header's is refused before
     * anything of it but the size is read or written. */
    {
        struct sigretire_stats stats = SIZED(sigretire_stats);
        struct sigretire_request unsized;
        memset(&unsized, 0, sizeof unsized);
        CHECK_STATUS(sigretire_tracker_acquire(one, &unsized, &acquired),
                     SIGRETIRE_ERR_STRUCT_SIZE);
        stats.size = sizeof stats + 8; /* a newer header's, say */
        stats.uses = 12345;
        CHECK_STATUS(sigretire_tracker_stats(one, &stats), SIGRETIRE_ERR_STRUCT_SIZE);
        CHECK(stats.uses == 12345); /* not written */
        CHECK_STATUS(sigretire_status_name(SIGRETIRE_ERR_STRUCT_SIZE, &name), SIGRETIRE_OK);
        CHECK(strcmp(name, "SIGRETIRE_ERR_STRUCT_SIZE") == 0);
    }

    /* No ROCm at this path: a load error, not a crash or a hang. */
    CHECK_STATUS(sigretire_rocr_open("/nonexistent/libhsa-runtime64.so.1", &rocr), SIGRETIRE_ERR_LOAD);
    CHECK(rocr == NULL);

    CHECK_OK(sigretire_tracker_destroy(&one));
    CHECK_OK(sigretire_tracker_destroy(&one)); /* NULL now: a no-op */
    CHECK_OK(sigretire_tracker_destroy(&other));
    CHECK_OK(sigretire_sim_destroy(&sim));
}

/* The two wait policies, as the header describes them. */
static void wait_policies(void) {
    struct sigretire_wait_policy policy = SIZED(sigretire_wait_policy);
    CHECK_OK(sigretire_wait_policy_spin(&policy));
    CHECK(policy.spin_ns == 50000 && policy.device_spin_ns == 50000);
    CHECK(policy.yield_ns == 1000000 && policy.max_sleep_ns == 500000);
    CHECK_OK(sigretire_wait_policy_blocking(&policy));
    CHECK(policy.spin_ns == 10000);     /* on host-memory signals */
    CHECK(policy.device_spin_ns == 0);  /* no PCIe reads back to back */
    CHECK(policy.yield_ns == 20000 && policy.max_sleep_ns == 200000);
    CHECK(policy.hybrid == 0);

    /* The blocking policy, which first dozes until shortly before the
     * expected end (here 2 ms) and spins the last stretch. */
    CHECK_OK(sigretire_wait_policy_hybrid(&policy, 2000000u));
    CHECK(policy.hybrid == 1 && policy.hybrid_expected_ns == 2000000u);
    CHECK(policy.spin_ns == 10000 && policy.device_spin_ns == 0);
    CHECK(policy.yield_ns == 20000 && policy.max_sleep_ns == 200000);
    CHECK(policy.hybrid_early_ns == 2000 && policy.hybrid_late_ns == 20000);
    CHECK(policy.hybrid_recheck_ns == 100000 && policy.hybrid_min_guess_ns == 50000);
    CHECK_OK(sigretire_wait_policy_hybrid(&policy, 0)); /* the tracker's guess */
    CHECK(policy.hybrid == 1 && policy.hybrid_expected_ns == 0);
    CHECK_STATUS(sigretire_wait_policy_hybrid(NULL, 0), SIGRETIRE_ERR_NULL);

    /* A program built with an earlier header passes the struct as it was,
     * 40 bytes up to `hybrid`: the library writes that much only, and a
     * hybrid policy, which needs the fields past it, is refused. */
    {
        struct sigretire_wait_policy earlier = SIZED(sigretire_wait_policy);
        earlier.size = (uint32_t)offsetof(struct sigretire_wait_policy, hybrid);
        CHECK(earlier.size == 40);
        earlier.hybrid = 7; /* past the earlier struct: left alone */
        CHECK_OK(sigretire_wait_policy_blocking(&earlier));
        CHECK(earlier.size == 40 && earlier.spin_ns == 10000 && earlier.hybrid == 7);
        CHECK_STATUS(sigretire_wait_policy_hybrid(&earlier, 0), SIGRETIRE_ERR_STRUCT_SIZE);
    }
}

int main(void) {
    uint32_t version = 0;
    CHECK_OK(sigretire_abi_version(&version));
    CHECK(version == SIGRETIRE_ABI_VERSION);

    wait_policies();

    sixty_four_fences();
    a_packet_written_by_hand();
    hold_and_pin();
    destroying_a_consumer_keeps_its_pins();
    timestamps();
    back_pressure();
    waits_on_other_threads();
    hooks_over_a_runtimes_own_memory();
    bad_input();

    if (wrong != 0) {
        fprintf(stderr, "sigretire C test: %d of %d checks WRONG\n", wrong, checks);
        return 1;
    }
    printf("sigretire C test: all %d checks right\n", checks);
    return 0;
}
