// The C++ compile check of include/sigretire.h: the header must be valid
// C++ (compiled with -fsyntax-only by tests/c_program.rs and capi/ci.sh),
// its enumerations must have the fixed underlying types the library uses,
// and its structs the sizes of the C ABI.

#include "sigretire.h"

#include <cstddef>
#include <cstdint>
#include <type_traits>

static_assert(std::is_same<std::underlying_type<sigretire_status>::type, std::int32_t>::value,
              "sigretire_status is an int32_t");
static_assert(std::is_same<std::underlying_type<sigretire_use_status>::type, std::uint32_t>::value,
              "sigretire_use_status is a uint32_t");
static_assert(sizeof(sigretire_ticket) == 32, "a ticket is four words");
static_assert(std::is_trivially_copyable<sigretire_ticket>::value, "tickets are plain data");
static_assert(std::is_trivially_copyable<sigretire_stats>::value, "stats are plain data");
static_assert(std::is_trivially_copyable<sigretire_census>::value, "census is plain data");
static_assert(SIGRETIRE_OK == 0, "success is 0");

// Every struct passed by pointer but the ticket begins with its size.
#define SIZE_FIRST(type) \
    static_assert(offsetof(type, size) == 0 && sizeof(((type *)nullptr)->size) == 4, \
                  #type " begins with uint32_t size")
SIZE_FIRST(sigretire_request);
SIZE_FIRST(sigretire_acquired);
SIZE_FIRST(sigretire_config);
SIZE_FIRST(sigretire_wait_policy);
SIZE_FIRST(sigretire_timestamps);
SIZE_FIRST(sigretire_stats);
SIZE_FIRST(sigretire_census);
SIZE_FIRST(sigretire_work);
SIZE_FIRST(sigretire_sim_options);
SIZE_FIRST(sigretire_rocr_adopt_options);
SIZE_FIRST(sigretire_hooks);

// Fields are appended within a version: the wait policy's earlier layout
// (40 bytes, which the library still takes) is a prefix of this one.
static_assert(offsetof(sigretire_wait_policy, hybrid) == 40 &&
                  offsetof(sigretire_wait_policy, device_spin_ns) == 32,
              "the hybrid fields follow the earlier wait policy");

namespace {

// Calls through the header's declarations, so their C++ linkage is checked
// too (extern "C" comes from the header's cpp_compat guards).
sigretire_status first_use(sigretire_tracker *tracker, sigretire_ticket *ticket) {
    sigretire_request request = {};
    request.size = sizeof request;
    request.flags = SIGRETIRE_REQUEST_BARRIER;
    request.purpose = SIGRETIRE_PURPOSE_EVENT;
    sigretire_work work = {};
    work.size = sizeof work;
    work.kind = SIGRETIRE_WORK_MARKER;
    sigretire_acquired acquired = {};
    acquired.size = sizeof acquired;
    sigretire_status status = sigretire_tracker_submit(tracker, &request, &work, &acquired);
    *ticket = acquired.ticket;
    return status;
}

}  // namespace

int main() {
    sigretire_tracker *tracker = nullptr;
    sigretire_ticket ticket = {};
    return first_use(tracker, &ticket) == SIGRETIRE_ERR_NULL ? 0 : 1;
}
