/*
 * The C test of the C ABI's streams and events (the queue layer), on the
 * simulator: work is pending until the simulated GPU runs it, a
 * synchronize with a short deadline times out, a cross-stream wait orders
 * one stream's work after another's event, a failed stream answers its own
 * status while the device's other stream keeps working, a device-wide
 * fault stops the device, handles may be destroyed in any order, and a
 * destroyed or wrong handle is refused with a status, never a crash. The
 * CUDA functions answer a typed status on a machine without a GPU. A
 * completion callback runs on the device's callback thread once the GPU
 * ran the work, and a release once the work retired. It exits 1 on any
 * wrong answer.
 */

#define _POSIX_C_SOURCE 200809L

#include "sigretire.h"
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* 1 ms, in nanoseconds. */
#define MS 1000000u

/* A simulator (threaded: blocking calls need no other thread to run it)
 * and a device on it. */
static void sim_and_device(uint32_t flags, sigretire_sim **sim, sigretire_device **device) {
    struct sigretire_sim_options options = {.size = sizeof options};
    CHECK_OK(sigretire_sim_options_default(&options));
    options.flags = flags;
    CHECK_OK(sigretire_sim_create(&options, sim));
    CHECK_OK(sigretire_sim_device_create(*sim, NULL, NULL, NULL, device));
}

static sigretire_use_status stream_status(const sigretire_stream *stream) {
    sigretire_use_status status = SIGRETIRE_USE_UNKNOWN;
    CHECK_OK(sigretire_stream_query(stream, &status));
    return status;
}

static sigretire_use_status event_status(const sigretire_event *event) {
    sigretire_use_status status = SIGRETIRE_USE_UNKNOWN;
    CHECK_OK(sigretire_event_query(event, &status));
    return status;
}

/* On a stepped simulator nothing completes until the GPU is run. */
static void pending_until_the_gpu_runs(void) {
    sigretire_sim *sim = NULL;
    sigretire_device *device = NULL;
    sigretire_stream *stream = NULL;
    sigretire_event *event = NULL;
    sim_and_device(0, &sim, &device);
    CHECK_OK(sigretire_device_default_stream(device, &stream));
    CHECK(stream_status(stream) == SIGRETIRE_USE_COMPLETE); /* nothing submitted */
    CHECK_OK(sigretire_stream_launch_empty(stream));
    CHECK_OK(sigretire_event_record(stream, 0, &event));
    CHECK(event_status(event) == SIGRETIRE_USE_PENDING);
    CHECK(stream_status(stream) == SIGRETIRE_USE_PENDING);
    CHECK_STATUS(sigretire_event_synchronize_timeout(event, 1 * MS), SIGRETIRE_ERR_TIMED_OUT);
    CHECK_STATUS(sigretire_stream_synchronize_timeout(stream, 1 * MS), SIGRETIRE_ERR_TIMED_OUT);
    CHECK_STATUS(sigretire_device_synchronize_timeout(device, 1 * MS), SIGRETIRE_ERR_TIMED_OUT);
    CHECK_OK(sigretire_sim_run_until_idle(sim));
    CHECK(event_status(event) == SIGRETIRE_USE_COMPLETE);
    CHECK(stream_status(stream) == SIGRETIRE_USE_COMPLETE);
    CHECK_OK(sigretire_event_synchronize_timeout(event, 0));
    CHECK_OK(sigretire_stream_synchronize(stream));
    CHECK_OK(sigretire_event_destroy(&event));
    CHECK_OK(sigretire_stream_destroy(&stream));
    CHECK_OK(sigretire_device_destroy(&device));
    CHECK_OK(sigretire_sim_destroy(&sim));
}

/* What a completion callback saw. */
struct seen {
    atomic_int calls;
    atomic_int outcome;
    pthread_t thread;  /* written before `calls`, read after it */
};

static void on_complete(sigretire_completion outcome, void *user) {
    struct seen *seen = user;
    seen->thread = pthread_self();
    atomic_store(&seen->outcome, (int)outcome);
    atomic_fetch_add(&seen->calls, 1);
}

static void on_retired(void *user) {
    atomic_fetch_add((atomic_int *)user, 1);
}

/* Waits up to 10 s for `*count` to reach `at_least`. */
static int wait_for(atomic_int *count, int at_least) {
    struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000000};
    for (int i = 0; i < 10000 && atomic_load(count) < at_least; i++) {
        nanosleep(&ms, NULL);
    }
    return atomic_load(count) >= at_least;
}

/* A completion callback runs on the device's callback thread once the
 * stepped GPU ran the work; a release runs once, after the work retired. */
static void callbacks_and_releases(void) {
    sigretire_sim *sim = NULL;
    sigretire_device *device = NULL;
    sigretire_stream *stream = NULL;
    uint64_t gated = 0;
    struct seen seen;
    atomic_int released;
    struct sigretire_callback_stats stats = {.size = sizeof stats};
    atomic_init(&seen.calls, 0);
    atomic_init(&seen.outcome, 0);
    atomic_init(&released, 0);
    sim_and_device(0, &sim, &device);
    CHECK_OK(sigretire_device_default_stream(device, &stream));
    CHECK_OK(sigretire_sim_register_gated_kernel(sim, &gated));
    CHECK_OK(sigretire_stream_launch(stream, gated));
    CHECK_OK(sigretire_stream_on_complete(stream, on_complete, &seen));
    CHECK_OK(sigretire_stream_release_after(stream, on_retired, &released));
    CHECK_STATUS(sigretire_stream_on_complete(stream, NULL, &seen), SIGRETIRE_ERR_NULL);
    CHECK_STATUS(sigretire_stream_release_after(stream, NULL, &released), SIGRETIRE_ERR_NULL);
    CHECK_OK(sigretire_sim_run_until_idle(sim)); /* the gate is shut: nothing ran */
    nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 50000000}, NULL);
    CHECK(atomic_load(&seen.calls) == 0);
    CHECK(atomic_load(&released) == 0);
    CHECK_OK(sigretire_sim_open_gate(sim, gated));
    CHECK_OK(sigretire_sim_run_until_idle(sim));
    CHECK(wait_for(&seen.calls, 1));
    CHECK(atomic_load(&seen.outcome) == SIGRETIRE_COMPLETION_COMPLETE);
    CHECK(!pthread_equal(seen.thread, pthread_self()));
    CHECK_OK(sigretire_stream_synchronize(stream)); /* the retirement proof */
    CHECK(wait_for(&released, 1));
    CHECK_OK(sigretire_device_callback_stats(device, &stats));
    CHECK(stats.run == 1 && stats.cancelled == 0);
    CHECK_OK(sigretire_stream_destroy(&stream));
    CHECK_OK(sigretire_device_destroy(&device));
    CHECK_OK(sigretire_sim_destroy(&sim));
    CHECK(atomic_load(&seen.calls) == 1 && atomic_load(&released) == 1); /* once each */
}

/* A stream that waits for another's event runs its later work after it. */
static void a_cross_stream_wait_orders_work(void) {
    sigretire_sim *sim = NULL;
    sigretire_device *device = NULL;
    sigretire_stream *producer = NULL;
    sigretire_stream *consumer = NULL;
    sigretire_event *produced = NULL;
    sigretire_event *consumed = NULL;
    sigretire_event *unordered = NULL;
    uint64_t gated = 0;
    sim_and_device(SIGRETIRE_SIM_THREADED, &sim, &device);
    CHECK_OK(sigretire_device_stream_create(device, NULL, &producer));
    CHECK_OK(sigretire_device_stream_create(device, NULL, &consumer));
    CHECK_OK(sigretire_sim_register_gated_kernel(sim, &gated));

    CHECK_OK(sigretire_stream_launch(producer, gated));
    CHECK_OK(sigretire_event_record(producer, 0, &produced));
    /* Work on the consumer before the wait is not held back. */
    CHECK_OK(sigretire_stream_launch_empty(consumer));
    CHECK_OK(sigretire_event_record(consumer, 0, &unordered));
    CHECK_OK(sigretire_event_synchronize_timeout(unordered, 5000 * MS));
    CHECK_OK(sigretire_stream_wait_event(consumer, produced));
    CHECK_OK(sigretire_stream_launch_empty(consumer));
    CHECK_OK(sigretire_event_record(consumer, 0, &consumed));

    CHECK_STATUS(sigretire_event_synchronize_timeout(consumed, 5 * MS), SIGRETIRE_ERR_TIMED_OUT);
    CHECK(event_status(consumed) == SIGRETIRE_USE_PENDING);
    CHECK(event_status(produced) == SIGRETIRE_USE_PENDING);
    CHECK_OK(sigretire_sim_open_gate(sim, gated));
    CHECK_OK(sigretire_event_synchronize(consumed));
    CHECK(event_status(produced) == SIGRETIRE_USE_COMPLETE);

    /* Timing: the gated kernel ran between the two points. */
    uint64_t elapsed = 0;
    sigretire_event *after = NULL;
    CHECK_OK(sigretire_event_record(producer, 0, &after));
    CHECK_OK(sigretire_event_synchronize(after));
    CHECK_OK(sigretire_event_elapsed_ns(produced, after, &elapsed));
    CHECK_OK(sigretire_event_elapsed_ns(produced, produced, &elapsed));
    CHECK(elapsed == 0);
    CHECK_STATUS(sigretire_event_elapsed_ns(after, produced, &elapsed),
                 SIGRETIRE_ERR_STOP_BEFORE_START);
    sigretire_event *untimed = NULL;
    CHECK_OK(sigretire_event_record(producer, SIGRETIRE_EVENT_DISABLE_TIMING, &untimed));
    CHECK_OK(sigretire_event_synchronize(untimed));
    CHECK_STATUS(sigretire_event_elapsed_ns(produced, untimed, &elapsed), SIGRETIRE_ERR_NOT_TIMED);

    CHECK_OK(sigretire_device_synchronize(device));
    CHECK_OK(sigretire_event_destroy(&untimed));
    CHECK_OK(sigretire_event_destroy(&after));
    CHECK_OK(sigretire_event_destroy(&unordered));
    CHECK_OK(sigretire_event_destroy(&consumed));
    CHECK_OK(sigretire_event_destroy(&produced));
    CHECK_OK(sigretire_stream_destroy(&consumer));
    CHECK_OK(sigretire_stream_destroy(&producer));
    CHECK_OK(sigretire_device_destroy(&device));
    uint64_t violations = 1;
    CHECK_OK(sigretire_sim_violations(sim, &violations));
    CHECK(violations == 0);
    CHECK_OK(sigretire_sim_destroy(&sim));
}

/* A failed stream answers SIGRETIRE_ERR_STREAM_FAILED; the other works. */
static void a_failed_stream_leaves_the_other_working(void) {
    sigretire_sim *sim = NULL;
    sigretire_device *device = NULL;
    sigretire_stream *failing = NULL;
    sigretire_stream *healthy = NULL;
    sigretire_event *lost = NULL;
    uint64_t gated = 0;
    bool failed = true;
    sim_and_device(SIGRETIRE_SIM_THREADED, &sim, &device);
    CHECK_OK(sigretire_device_stream_create(device, NULL, &failing));
    CHECK_OK(sigretire_device_default_stream(device, &healthy));
    CHECK_OK(sigretire_sim_register_gated_kernel(sim, &gated));

    CHECK_OK(sigretire_stream_launch(failing, gated));
    CHECK_OK(sigretire_event_record(failing, 0, &lost));
    CHECK_OK(sigretire_stream_has_failed(failing, &failed));
    CHECK(!failed);
    CHECK_OK(sigretire_sim_fail_stream(failing));
    CHECK_STATUS(sigretire_stream_synchronize(failing), SIGRETIRE_ERR_STREAM_FAILED);
    {
        char message[512];
        size_t length = 0;
        CHECK_OK(sigretire_last_error(message, sizeof message, &length));
        CHECK(strstr(message, "failed") != NULL);
        CHECK(strstr(message, "sigretire_stream_destroy") != NULL);
    }
    CHECK_OK(sigretire_stream_has_failed(failing, &failed));
    CHECK(failed);
    CHECK(stream_status(failing) == SIGRETIRE_USE_FAILED);
    CHECK(event_status(lost) == SIGRETIRE_USE_FAILED);
    CHECK_STATUS(sigretire_event_synchronize(lost), SIGRETIRE_ERR_STREAM_FAILED);
    CHECK_STATUS(sigretire_stream_launch_empty(failing), SIGRETIRE_ERR_STREAM_FAILED);
    /* Nothing may wait for a failed stream's event; the waiter is not failed. */
    CHECK_STATUS(sigretire_stream_wait_event(healthy, lost), SIGRETIRE_ERR_STREAM_FAILED);

    CHECK_OK(sigretire_stream_launch_empty(healthy));
    CHECK_OK(sigretire_stream_synchronize(healthy));
    CHECK_OK(sigretire_stream_has_failed(healthy, &failed));
    CHECK(!failed);
    /* Device synchronize stops at the failed stream; without it, it passes. */
    CHECK_STATUS(sigretire_device_synchronize(device), SIGRETIRE_ERR_STREAM_FAILED);
    CHECK_OK(sigretire_event_destroy(&lost));
    CHECK_OK(sigretire_stream_destroy(&failing));
    CHECK_OK(sigretire_device_synchronize(device));
    CHECK_OK(sigretire_stream_destroy(&healthy));
    CHECK_OK(sigretire_device_destroy(&device));
    CHECK_OK(sigretire_sim_destroy(&sim));
}

/* A device-wide fault stops the device: an aborting device takes no work. */
static void a_device_fault_stops_the_device(void) {
    sigretire_sim *sim = NULL;
    sigretire_device *device = NULL;
    sigretire_stream *stream = NULL;
    sim_and_device(SIGRETIRE_SIM_THREADED, &sim, &device);
    CHECK_OK(sigretire_device_default_stream(device, &stream));
    CHECK_OK(sigretire_device_set_error(device, "lost in a test"));
    CHECK_STATUS(sigretire_stream_launch_empty(stream), SIGRETIRE_ERR_DEVICE_ABORTED);
    CHECK_OK(sigretire_stream_destroy(&stream));
    CHECK_OK(sigretire_device_destroy(&device));
    CHECK_OK(sigretire_sim_destroy(&sim));
}

/* Handles go in any order: streams and events keep the device alive. */
static void teardown_in_any_order(void) {
    sigretire_sim *sim = NULL;
    sigretire_device *device = NULL;
    sigretire_stream *stream = NULL;
    sigretire_event *event = NULL;
    sim_and_device(SIGRETIRE_SIM_THREADED, &sim, &device);
    CHECK_OK(sigretire_device_stream_create(device, NULL, &stream));
    CHECK_OK(sigretire_sim_destroy(&sim));
    CHECK_OK(sigretire_device_destroy(&device));
    CHECK(device == NULL);
    CHECK_OK(sigretire_stream_launch_empty(stream));
    CHECK_OK(sigretire_event_record(stream, 0, &event));
    CHECK_OK(sigretire_stream_destroy(&stream));
    CHECK_OK(sigretire_event_synchronize(event));
    CHECK(event_status(event) == SIGRETIRE_USE_COMPLETE);
    CHECK_OK(sigretire_event_destroy(&event));
    CHECK_OK(sigretire_event_destroy(&event)); /* NULL: a no-op */
}

/* Destroyed, wrong and made-up handles, and bad arguments, are refused. */
static void bad_handles_and_arguments(void) {
    sigretire_sim *sim = NULL;
    sigretire_device *device = NULL;
    sigretire_stream *stream = NULL;
    sigretire_event *event = NULL;
    sigretire_event *destroyed = NULL;
    sigretire_use_status status = SIGRETIRE_USE_UNKNOWN;
    uint64_t word = 0;
    sim_and_device(0, &sim, &device);
    CHECK_OK(sigretire_device_default_stream(device, &stream));
    CHECK_OK(sigretire_event_record(stream, 0, &event));
    CHECK_OK(sigretire_event_record(stream, 0, &destroyed));
    sigretire_event *stale = destroyed;
    CHECK_OK(sigretire_event_destroy(&destroyed));
    CHECK_STATUS(sigretire_event_query(stale, &status), SIGRETIRE_ERR_BAD_HANDLE);
    CHECK_STATUS(sigretire_event_destroy(&stale), SIGRETIRE_ERR_BAD_HANDLE);
    CHECK_STATUS(sigretire_stream_wait_event(stream, (const sigretire_event *)stream),
                 SIGRETIRE_ERR_BAD_HANDLE);
    CHECK_STATUS(sigretire_stream_launch((const sigretire_stream *)&word, 0),
                 SIGRETIRE_ERR_BAD_HANDLE);
    CHECK_STATUS(sigretire_event_query(NULL, &status), SIGRETIRE_ERR_NULL);
    CHECK_STATUS(sigretire_stream_query(stream, NULL), SIGRETIRE_ERR_NULL);
    CHECK_STATUS(sigretire_event_record(stream, 0x80, &destroyed), SIGRETIRE_ERR_INVALID_ARGUMENT);
    CHECK(destroyed == NULL);
    struct sigretire_stream_options unsized = {0};
    sigretire_stream *extra = NULL;
    CHECK_STATUS(sigretire_device_stream_create(device, &unsized, &extra),
                 SIGRETIRE_ERR_STRUCT_SIZE);
    struct sigretire_stream_options options = {.size = sizeof options};
    CHECK_OK(sigretire_stream_options_default(&options));
    options.flags = 0x100;
    CHECK_STATUS(sigretire_device_stream_create(device, &options, &extra),
                 SIGRETIRE_ERR_INVALID_ARGUMENT);
    CHECK(extra == NULL);
    /* A ROCr-only call on a simulator device. */
    CHECK_STATUS(sigretire_rocr_stream_adopt(device, &word, NULL, NULL, NULL, NULL, &extra),
                 SIGRETIRE_ERR_WRONG_BACKEND);
    /* An event not complete has no elapsed time yet. */
    CHECK_STATUS(sigretire_event_elapsed_ns(event, event, &word), SIGRETIRE_ERR_NOT_READY);
    CHECK_OK(sigretire_event_destroy(&event));
    CHECK_OK(sigretire_stream_destroy(&stream));
    CHECK_OK(sigretire_device_destroy(&device));
    CHECK_OK(sigretire_sim_destroy(&sim));
}

/* CUDA from C: typed statuses without a GPU (or without the backend). The
 * legacy default stream (1) is refused before any driver call where a GPU
 * is present. */
static void cuda_without_a_gpu(void) {
    sigretire_device *device = NULL;
    sigretire_status status =
        sigretire_cuda_device_adopt(0, (void *)1, NULL, NULL, NULL, NULL, NULL, &device);
    CHECK(status == SIGRETIRE_ERR_LOAD || status == SIGRETIRE_ERR_NO_GPU ||
          status == SIGRETIRE_ERR_UNSUPPORTED || status == SIGRETIRE_ERR_INVALID_ARGUMENT);
    CHECK(device == NULL);
    CHECK_STATUS(sigretire_cuda_device_adopt(0, NULL, NULL, NULL, NULL, NULL, NULL, &device),
                 SIGRETIRE_ERR_NULL);
    CHECK(device == NULL);
}

int main(void) {
    uint32_t version = 0;
    CHECK_OK(sigretire_abi_version(&version));
    CHECK(version == SIGRETIRE_ABI_VERSION);
    pending_until_the_gpu_runs();
    a_cross_stream_wait_orders_work();
    a_failed_stream_leaves_the_other_working();
    a_device_fault_stops_the_device();
    teardown_in_any_order();
    bad_handles_and_arguments();
    cuda_without_a_gpu();
    callbacks_and_releases();
    if (wrong) {
        fprintf(stderr, "%d of %d checks wrong\n", wrong, checks);
        return 1;
    }
    printf("streams: %d checks right\n", checks);
    return 0;
}
