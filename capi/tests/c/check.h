/* The C tests' checks: each counts, and a wrong one says where it is and
 * prints the library's last error. Included by sigretire_test.c and
 * streams_test.c after sigretire.h. */
#ifndef SIGRETIRE_TEST_CHECK_H
#define SIGRETIRE_TEST_CHECK_H

#include <stdio.h>

static int checks;
static int wrong;

/* Records one check; prints the library's last error when it is wrong. */
static void check(int ok, const char *what, const char *file, int line) {
    checks++;
    if (!ok) {
        char message[512];
        size_t length = 0;
        wrong++;
        fprintf(stderr, "%s:%d: WRONG: %s\n", file, line, what);
        if (sigretire_last_error(message, sizeof message, &length) == SIGRETIRE_OK && length > 1) {
            fprintf(stderr, "    last error: %s\n", message);
        }
    }
}

#define CHECK(cond) check((cond) ? 1 : 0, #cond, __FILE__, __LINE__)
#define CHECK_OK(call) CHECK((call) == SIGRETIRE_OK)
#define CHECK_STATUS(call, status) CHECK((call) == (status))

#endif
