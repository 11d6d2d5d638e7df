/* The next input of a test program: its inputs are doubles on stdin, which the test wrote. */
#ifndef ANYCUDA_TEST_INPUT_POOL_H
#define ANYCUDA_TEST_INPUT_POOL_H
#include <stdio.h>
#include <stdlib.h>

static double take(void) {
    double v;
    if (fread(&v, sizeof v, 1, stdin) != 1) {
        fprintf(stderr, "the input pool ran out\n");
        exit(2);
    }
    return v;
}
#endif
