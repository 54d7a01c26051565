/*
 * Streams and events from C, on a simulated GPU: a device, two streams,
 * launches, an event recorded on one stream and waited for on the other
 * (on the GPU), elapsed time, query and synchronize, device synchronize,
 * and a clean teardown. It prints what happens and exits 0, or exits 1
 * naming the call that failed.
 *
 * Build it against the installed library (capi/ci.sh does):
 *     cargo run -p sigretire-capi --example install -- --prefix "$PREFIX"
 *     export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig"
 *     cc -std=c11 capi/examples/streams.c $(pkg-config --cflags --libs sigretire_capi) \
 *        -Wl,-rpath,"$PREFIX/lib" -o streams
 */

#include "sigretire.h"

#include <stdio.h>
#include <stdlib.h>

/* Runs a call of the library; on failure prints its last error and exits 1. */
#define TRY(call)                                                                     \
    do {                                                                              \
        sigretire_status status_ = (call);                                            \
        if (status_ != SIGRETIRE_OK) {                                                \
            char message_[512];                                                       \
            size_t length_ = 0;                                                       \
            const char *name_ = "?";                                                  \
            sigretire_status_name(status_, &name_);                                   \
            sigretire_last_error(message_, sizeof message_, &length_);                \
            fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #call, \
                    name_, message_);                                                 \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

static const char *status_text(sigretire_use_status status) {
    switch (status) {
    case SIGRETIRE_USE_PENDING: return "pending";
    case SIGRETIRE_USE_COMPLETE: return "complete";
    case SIGRETIRE_USE_FAILED: return "failed";
    default: return "unknown";
    }
}

int main(void) {
    uint32_t version = 0;
    TRY(sigretire_abi_version(&version));
    if (version != SIGRETIRE_ABI_VERSION) {
        fprintf(stderr, "library ABI %u, header ABI %u\n", version, SIGRETIRE_ABI_VERSION);
        return 1;
    }

    /* A simulated GPU that runs in real time, and a device on it. */
    struct sigretire_sim_options options = {.size = sizeof options};
    TRY(sigretire_sim_options_default(&options));
    options.flags |= SIGRETIRE_SIM_THREADED;
    sigretire_sim *sim = NULL;
    TRY(sigretire_sim_create(&options, &sim));
    sigretire_device *device = NULL;
    TRY(sigretire_sim_device_create(sim, NULL, NULL, NULL, &device));

    /* Two streams: the device's default one (the null stream) and a new one. */
    sigretire_stream *producer = NULL;
    sigretire_stream *consumer = NULL;
    TRY(sigretire_device_default_stream(device, &producer));
    TRY(sigretire_device_stream_create(device, NULL, &consumer));

    /* A kernel that cannot finish before the host opens its gate. */
    uint64_t gated = 0;
    TRY(sigretire_sim_register_gated_kernel(sim, &gated));

    /* The producer: a timed start event, the gated kernel, a timed stop event. */
    sigretire_event *start = NULL;
    sigretire_event *stop = NULL;
    TRY(sigretire_event_record(producer, 0, &start));
    TRY(sigretire_stream_launch(producer, gated));
    TRY(sigretire_event_record(producer, 0, &stop));

    /* The consumer waits, on the GPU, for the producer's stop event. */
    TRY(sigretire_stream_wait_event(consumer, stop));
    TRY(sigretire_stream_launch_empty(consumer));
    sigretire_event *consumed = NULL;
    TRY(sigretire_event_record(consumer, SIGRETIRE_EVENT_DISABLE_TIMING, &consumed));

    sigretire_use_status status = SIGRETIRE_USE_UNKNOWN;
    TRY(sigretire_stream_query(consumer, &status));
    printf("before the gate opens: the consumer stream is %s\n", status_text(status));
    if (status != SIGRETIRE_USE_PENDING) {
        fprintf(stderr, "the consumer ran before the producer's event\n");
        return 1;
    }
    if (sigretire_event_synchronize_timeout(consumed, 2000000) != SIGRETIRE_ERR_TIMED_OUT) {
        fprintf(stderr, "a 2 ms wait for the consumer did not time out\n");
        return 1;
    }
    printf("a 2 ms synchronize of the consumer's event timed out, as it must\n");

    /* Open the gate: the producer finishes, then the consumer. */
    TRY(sigretire_sim_open_gate(sim, gated));
    TRY(sigretire_stream_synchronize(consumer));
    TRY(sigretire_event_query(stop, &status));
    printf("after the consumer synchronized: the producer's stop event is %s\n",
           status_text(status));
    if (status != SIGRETIRE_USE_COMPLETE) {
        fprintf(stderr, "the consumer completed before the producer's event\n");
        return 1;
    }

    uint64_t elapsed_ns = 0;
    TRY(sigretire_event_synchronize(stop));
    TRY(sigretire_event_elapsed_ns(start, stop, &elapsed_ns));
    printf("the gated kernel took %llu ns of GPU time\n", (unsigned long long)elapsed_ns);

    /* More work on both streams, then everything on the device. */
    for (int i = 0; i < 8; i++) {
        TRY(sigretire_stream_launch_empty(producer));
        TRY(sigretire_stream_launch_empty(consumer));
    }
    TRY(sigretire_stream_marker(consumer));
    TRY(sigretire_device_synchronize(device));
    TRY(sigretire_stream_query(producer, &status));
    printf("after the device synchronized: the producer stream is %s\n", status_text(status));

    uint64_t violations = 0;
    TRY(sigretire_sim_violations(sim, &violations));
    printf("simulator violations: %llu\n", (unsigned long long)violations);

    /* Teardown, in any order: streams and events keep their device alive. */
    TRY(sigretire_device_destroy(&device));
    TRY(sigretire_event_destroy(&start));
    TRY(sigretire_event_destroy(&stop));
    TRY(sigretire_event_destroy(&consumed));
    TRY(sigretire_stream_destroy(&consumer));
    TRY(sigretire_stream_destroy(&producer));
    TRY(sigretire_sim_destroy(&sim));
    printf("streams example: ok\n");
    return violations == 0 ? 0 : 1;
}
