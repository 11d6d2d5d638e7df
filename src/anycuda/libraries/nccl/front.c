/* libnccl's front: small collectives answered in C on the caller's thread (and large ones
 * queued to a thread of its own: large.c).
 *
 * A collective through the library's Python costs tens of microseconds (the call into Python,
 * the operation queued on its stream, the stream's worker woken, MPI called from it), against
 * MPI's fraction of a microsecond for a small message. Where nothing could come before it (no
 * work queued on any stream, no error kept, no capture: runtime/stream.busy reads 0) and no
 * group is open on this thread, a small collective of a communicator whose ranks are
 * processes starts here at once: the messages of libraries/nccl/small.py's algorithm, sent and
 * received through MPI's own functions, whose addresses the library's Python gave us
 * (libraries/nccl/front.py). It waits for its peers for at most `spin_ns` (and a nanosecond for
 * each byte it moves: its own transfer's time); if they have not come by then, the operation is
 * handed to its stream (anycuda_nccl_adopt), whose worker finishes it, so the call returns in
 * microseconds whatever the peers do, as NCCL's does. Everything else (other types, averages,
 * bigger messages, groups, busy streams, stream handles it does not know to be live: the driver's
 * table of live streams, driver/handles.live_streams) is the Python's, which checks them.
 *
 * Handles of MPI (communicators, datatypes, requests) are pointers in Open MPI and ints in
 * MPICH; each is kept in an intptr_t and passed where the function expects its own type, which
 * on LP64 little-endian ABIs (x86-64, AArch64) reads the same value. A request slot is zeroed
 * first so MPICH's 4-byte request reads back whole. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ANYCUDA_MAX_RANKS = 64, ANYCUDA_MAX_COMMS = 256, ANYCUDA_STATUS_BYTES = 64 };
enum { KIND_ALL_REDUCE, KIND_BROADCAST, KIND_REDUCE, KIND_ALL_GATHER, KIND_REDUCE_SCATTER };
enum { NCCL_SUCCESS = 0, NCCL_REMOTE_ERROR = 6 };

typedef struct {                 /* libraries/nccl/front.Shared: one communicator, shared with Python */
    uint64_t handle;
    intptr_t mpi_comm;
    int rank, nranks;
    uint64_t seq;                /* small operations so far (small.py: their tags) */
    int enabled;
    uint64_t answered;           /* small operations this front finished itself */
    int device;                  /* the communicator's device (large.c: the legacy stream is the device's) */
    int error;                   /* MPI's error in an operation of large.c's thread (0: none) */
    uint64_t threaded;           /* large operations large.c's thread finished */
} anycuda_nccl_shared;

typedef int (*anycuda_mpi_isend)(const void *, int, intptr_t, int, int, intptr_t, intptr_t *);
typedef int (*anycuda_mpi_irecv)(void *, int, intptr_t, int, int, intptr_t, intptr_t *);
typedef int (*anycuda_mpi_test)(intptr_t *, int *, void *);

static struct {
    volatile long *busy;
    anycuda_mpi_isend isend;
    anycuda_mpi_irecv irecv;
    anycuda_mpi_test test;
    intptr_t byte;               /* MPI_BYTE */
    size_t small_bytes;
    long spin_ns;                /* how long the caller waits for its peers, */
    double spin_ns_per_byte;     /* and for each byte it moves */
    int tag_base, tag_span;
    const volatile unsigned char *live_streams;   /* a byte per handle number: 1 while a live stream */
    size_t live_count;
    uintptr_t first_handle, handle_stride;
    int ready;
} anycuda_front;

static anycuda_nccl_shared *volatile anycuda_front_comms[ANYCUDA_MAX_COMMS];
static __thread int anycuda_group_depth;    /* ncclGroupStart calls not yet ended on this thread */

typedef struct {
    int kind, dtype, op, root, rank, n, tag, phase, phases, error;
    size_t count, bytes, moved;  /* elements and bytes of one block, bytes of all */
    intptr_t comm;
    const char *send;
    char *recv, *scratch;
    int nreq;
    intptr_t req[2 * ANYCUDA_MAX_RANKS];
    char finished[2 * ANYCUDA_MAX_RANKS];
    char status[ANYCUDA_STATUS_BYTES];
    anycuda_nccl_shared *shared;
} anycuda_small_op;

static int anycuda_nccl_front_setup(void *busy, void *isend, void *irecv, void *test, intptr_t byte, size_t small_bytes,
                             long spin_ns, double spin_ns_per_byte, int tag_base, int tag_span,
                             void *live_streams, size_t live_count, uintptr_t first_handle, uintptr_t handle_stride) {
    anycuda_front.live_streams = (const volatile unsigned char *)live_streams;
    anycuda_front.live_count = live_count;
    anycuda_front.first_handle = first_handle;
    anycuda_front.handle_stride = handle_stride;
    anycuda_front.busy = (volatile long *)busy;
    anycuda_front.isend = (anycuda_mpi_isend)isend;
    anycuda_front.irecv = (anycuda_mpi_irecv)irecv;
    anycuda_front.test = (anycuda_mpi_test)test;
    anycuda_front.byte = byte;
    anycuda_front.small_bytes = small_bytes;
    anycuda_front.spin_ns = spin_ns;
    anycuda_front.spin_ns_per_byte = spin_ns_per_byte;
    anycuda_front.tag_base = tag_base;
    anycuda_front.tag_span = tag_span;
    __atomic_store_n(&anycuda_front.ready, 1, __ATOMIC_RELEASE);
    return 0;
}

static int anycuda_nccl_front_register(void *shared) {
    for (int i = 0; i < ANYCUDA_MAX_COMMS; i++)
        if (__sync_bool_compare_and_swap(&anycuda_front_comms[i], NULL, (anycuda_nccl_shared *)shared))
            return 0;
    return -1;                   /* table full: that communicator's calls stay with Python */
}

static void anycuda_nccl_front_unregister(void *shared) {
    for (int i = 0; i < ANYCUDA_MAX_COMMS; i++)
        __sync_bool_compare_and_swap(&anycuda_front_comms[i], (anycuda_nccl_shared *)shared, NULL);
}

static anycuda_nccl_shared *anycuda_front_find(void *handle) {
    for (int i = 0; i < ANYCUDA_MAX_COMMS; i++) {
        anycuda_nccl_shared *s = __atomic_load_n(&anycuda_front_comms[i], __ATOMIC_ACQUIRE);
        if (s && s->handle == (uint64_t)(uintptr_t)handle)
            return s;
    }
    return NULL;
}

/* ---- the folds: op(low rank's values, high rank's), as numpy computes them (integers wrap,
 * a NaN wins a max or min) */
static size_t anycuda_type_size(int dtype) {
    switch (dtype) {            /* the types MPI-free C can fold: ncclInt8 ... ncclFloat64 but half */
    case 0: case 1: return 1;
    case 2: case 3: case 7: return 4;
    case 4: case 5: case 8: return 8;
    default: return 0;
    }
}

#define ANYCUDA_FOLD(T, U, EXPR)                                                          \
    {                                                                                      \
        const T *x = (const T *)low, *y = (const T *)high;                                 \
        T *z = (T *)out;                                                                   \
        for (size_t i = 0; i < count; i++) {                                               \
            T p = x[i], q = y[i];                                                          \
            z[i] = (EXPR);                                                                 \
        }                                                                                  \
    }                                                                                      \
    break;
#define ANYCUDA_FOLDS(T, U)                                                               \
    switch (op) {                                                                          \
    case 0: ANYCUDA_FOLD(T, U, (T)((U)p + (U)q))                                           \
    case 1: ANYCUDA_FOLD(T, U, (T)((U)p * (U)q))                                           \
    case 2: ANYCUDA_FOLD(T, U, (p >= q || p != p) ? p : q)                                 \
    default: ANYCUDA_FOLD(T, U, (p <= q || p != p) ? p : q)                                \
    }                                                                                      \
    break;

static void anycuda_fold(int dtype, int op, void *out, const void *low, const void *high, size_t count) {
    switch (dtype) {
    case 0: ANYCUDA_FOLDS(int8_t, uint8_t)
    case 1: ANYCUDA_FOLDS(uint8_t, uint8_t)
    case 2: ANYCUDA_FOLDS(int32_t, uint32_t)
    case 3: ANYCUDA_FOLDS(uint32_t, uint32_t)
    case 4: ANYCUDA_FOLDS(int64_t, uint64_t)
    case 5: ANYCUDA_FOLDS(uint64_t, uint64_t)
    case 7: ANYCUDA_FOLDS(float, float)
    default: ANYCUDA_FOLDS(double, double)
    }
}

/* ---- messages of one phase */
static void anycuda_post_send(anycuda_small_op *o, const void *from, int peer) {
    intptr_t *slot = &o->req[o->nreq];
    *slot = 0;
    o->finished[o->nreq++] = 0;
    if (!o->error)
        o->error = anycuda_front.isend(from, (int)o->bytes, anycuda_front.byte, peer, o->tag, o->comm, slot);
}

static void anycuda_post_receive(anycuda_small_op *o, void *into, int peer) {
    intptr_t *slot = &o->req[o->nreq];
    *slot = 0;
    o->finished[o->nreq++] = 0;
    if (!o->error)
        o->error = anycuda_front.irecv(into, (int)o->bytes, anycuda_front.byte, peer, o->tag, o->comm, slot);
}

/* whether the phase's messages have all gone (an MPI failure ends the operation) */
static int anycuda_messages_done(anycuda_small_op *o) {
    int all = 1;
    for (int i = 0; i < o->nreq && !o->error; i++) {
        if (o->finished[i])
            continue;
        int flag = 0;
        o->error = anycuda_front.test(&o->req[i], &flag, o->status);
        o->finished[i] = (char)flag;
        all &= flag;
    }
    return all || o->error;
}

static int anycuda_largest_power_of_two(int n) {
    int p = 1;
    while (p * 2 <= n)
        p *= 2;
    return p;
}

/* all-reduce by recursive doubling (small.py's _all_reduce): the values live in recv */
static void anycuda_all_reduce_post(anycuda_small_op *o) {
    int p = anycuda_largest_power_of_two(o->n), extra = o->rank + p < o->n, r = o->rank;
    if (r >= p) {                                 /* one phase: hand over, get the result */
        anycuda_post_send(o, o->recv, r - p);
        anycuda_post_receive(o, o->scratch, r - p);
        return;
    }
    int round = o->phase - extra;
    if (extra && o->phase == 0)
        anycuda_post_receive(o, o->scratch, r + p);
    else if (round < __builtin_ctz((unsigned)p)) {
        anycuda_post_send(o, o->recv, r ^ (1 << round));
        anycuda_post_receive(o, o->scratch, r ^ (1 << round));
    } else
        anycuda_post_send(o, o->recv, r + p);
}

static void anycuda_all_reduce_end(anycuda_small_op *o) {
    int p = anycuda_largest_power_of_two(o->n), extra = o->rank + p < o->n, r = o->rank;
    if (r >= p) {
        memcpy(o->recv, o->scratch, o->bytes);
        return;
    }
    int round = o->phase - extra;
    if (extra && o->phase == 0)
        anycuda_fold(o->dtype, o->op, o->recv, o->recv, o->scratch, o->count);
    else if (round < __builtin_ctz((unsigned)p)) {
        int partner = r ^ (1 << round);
        if (r < partner)
            anycuda_fold(o->dtype, o->op, o->recv, o->recv, o->scratch, o->count);
        else
            anycuda_fold(o->dtype, o->op, o->recv, o->scratch, o->recv, o->count);
    }
}

static int anycuda_all_reduce_phases(const anycuda_small_op *o) {
    int p = anycuda_largest_power_of_two(o->n);
    if (o->rank >= p)
        return 1;
    return __builtin_ctz((unsigned)p) + 2 * (o->rank + p < o->n);
}

/* the one-phase algorithms: Broadcast, Reduce, AllGather, ReduceScatter (small.py's run) */
static void anycuda_one_phase_post(anycuda_small_op *o) {
    size_t b = o->bytes;
    for (int r = 0; r < o->n; r++) {
        if (r == o->rank)
            continue;
        switch (o->kind) {
        case KIND_BROADCAST:
            if (o->rank == o->root)
                anycuda_post_send(o, o->recv, r);
            else if (r == o->root)
                anycuda_post_receive(o, o->recv, r);
            break;
        case KIND_REDUCE:
            if (o->rank == o->root)
                anycuda_post_receive(o, o->scratch + r * b, r);
            else if (r == o->root)
                anycuda_post_send(o, o->send, r);
            break;
        case KIND_ALL_GATHER:
            anycuda_post_receive(o, o->recv + r * b, r);
            anycuda_post_send(o, o->send, r);
            break;
        default:                                  /* KIND_REDUCE_SCATTER */
            anycuda_post_receive(o, o->scratch + r * b, r);
            anycuda_post_send(o, o->send + r * b, r);
        }
    }
}

static void anycuda_fold_in_rank_order(anycuda_small_op *o, const char *mine) {
    size_t b = o->bytes;
    char *total = o->scratch + o->n * b;
    memcpy(total, o->rank == 0 ? mine : o->scratch, b);
    for (int r = 1; r < o->n; r++)
        anycuda_fold(o->dtype, o->op, total, total, r == o->rank ? mine : o->scratch + r * b, o->count);
    memmove(o->recv, total, b);
}

static void anycuda_one_phase_end(anycuda_small_op *o) {
    size_t b = o->bytes;
    if (o->kind == KIND_REDUCE && o->rank == o->root)
        anycuda_fold_in_rank_order(o, o->send);
    else if (o->kind == KIND_REDUCE_SCATTER)
        anycuda_fold_in_rank_order(o, o->send + o->rank * b);
    else if (o->kind == KIND_ALL_GATHER && o->send != o->recv + o->rank * b)
        memcpy(o->recv + o->rank * b, o->send, b);
}

/* ---- an operation: posted phase by phase, each ended once its messages have gone */
static void anycuda_post_phase(anycuda_small_op *o) {
    o->nreq = 0;
    if (o->kind == KIND_ALL_REDUCE)
        anycuda_all_reduce_post(o);
    else
        anycuda_one_phase_post(o);
}

/* 1 when the operation has finished (o->error says how), 0 while messages are under way */
static int anycuda_small_advance(anycuda_small_op *o) {
    while (o->phase < o->phases) {
        if (!anycuda_messages_done(o))
            return 0;
        if (o->error)
            return 1;
        if (o->kind == KIND_ALL_REDUCE)
            anycuda_all_reduce_end(o);
        else
            anycuda_one_phase_end(o);
        if (++o->phase < o->phases)
            anycuda_post_phase(o);
    }
    return 1;
}

static long anycuda_elapsed_ns(const struct timespec *since);

/* for the stream's worker (GIL released): the operation's end, 0 or MPI's error code. It tests
 * without pausing for 50 ms, as MPI's own waits do, then pauses between tests (up to 1 ms), so
 * that peers that never come do not cost a core */
static int anycuda_nccl_front_finish(void *op) {
    anycuda_small_op *o = (anycuda_small_op *)op;
    struct timespec started, pause = {0, 0};
    clock_gettime(CLOCK_MONOTONIC, &started);
    while (!anycuda_small_advance(o)) {
        if (anycuda_elapsed_ns(&started) < 50000000L)
            continue;
        pause.tv_nsec = pause.tv_nsec < 1000000L ? pause.tv_nsec + 10000L : 1000000L;
        nanosleep(&pause, NULL);
    }
    return o->error;
}

static void anycuda_nccl_front_free(void *op) {
    free(((anycuda_small_op *)op)->scratch);
    free(op);
}

static long anycuda_elapsed_ns(const struct timespec *since) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - since->tv_sec) * 1000000000L + (now.tv_nsec - since->tv_nsec);
}

static int anycuda_overlaps(const char *a, size_t a_bytes, const char *b, size_t b_bytes) {
    return a < b + b_bytes && b < a + a_bytes;
}

/* whether this call is the front's to answer, and its operation made */
static anycuda_small_op *anycuda_small_op_for(int kind, const void *send, void *recv, size_t count, int dtype,
                                             int op, int root, void *handle) {
    if (!__atomic_load_n(&anycuda_front.ready, __ATOMIC_ACQUIRE) || count == 0 || !handle)
        return NULL;
    size_t size = anycuda_type_size(dtype);
    anycuda_nccl_shared *s = anycuda_front_find(handle);
    if (!size || !s || !s->enabled || s->nranks > ANYCUDA_MAX_RANKS)
        return NULL;
    int n = s->nranks, rank = s->rank;
    int reduces = kind == KIND_ALL_REDUCE || kind == KIND_REDUCE || kind == KIND_REDUCE_SCATTER;
    int blocks = kind == KIND_ALL_GATHER || kind == KIND_REDUCE_SCATTER ? n : 1;
    if ((reduces && (op < 0 || op > 3)) || root < 0 || root >= n || count > anycuda_front.small_bytes
            || count * size * blocks > anycuda_front.small_bytes)
        return NULL;
    size_t bytes = count * size;
    int sends = kind != KIND_BROADCAST || rank == root, receives = kind != KIND_REDUCE || rank == root;
    if ((sends && !send) || (receives && !recv))
        return NULL;                              /* the Python names the argument */
    if (kind == KIND_ALL_GATHER && send != recv + rank * bytes
            && anycuda_overlaps(send, bytes, recv, n * bytes))
        return NULL;                              /* a send block inside the output but not in place */
    /* room for what arrives: the peers' blocks and a total (reductions), one block (all-reduce) */
    size_t scratch = kind == KIND_REDUCE || kind == KIND_REDUCE_SCATTER ? (n + 1) * bytes
                   : kind == KIND_ALL_REDUCE ? bytes : 0;
    anycuda_small_op *o = calloc(1, sizeof *o);
    char *room = scratch ? malloc(scratch) : NULL;
    if (!o || (scratch && !room)) {
        free(o);
        free(room);
        return NULL;
    }
    o->kind = kind, o->dtype = dtype, o->op = op, o->root = root, o->rank = rank, o->n = n;
    o->count = count, o->bytes = bytes, o->moved = bytes * blocks, o->comm = s->mpi_comm;
    o->send = send, o->recv = recv, o->scratch = room, o->shared = s;
    o->phases = kind == KIND_ALL_REDUCE ? anycuda_all_reduce_phases(o) : 1;
    return o;
}

static int anycuda_python_nccl_adopt(void *comm, void *stream, void *op);

/* 1 for the NULL, legacy and per-thread streams and for a handle the driver's table marks as a
 * live stream; 0 for any other (the Python's to check and refuse) */
static int anycuda_stream_known_live(void *stream) {
    uintptr_t h = (uintptr_t)stream;
    if (h <= 2)                  /* 0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD */
        return 1;
    if (h < anycuda_front.first_handle || (h - anycuda_front.first_handle) % anycuda_front.handle_stride)
        return 0;
    uintptr_t index = (h - anycuda_front.first_handle) / anycuda_front.handle_stride;
    return index < anycuda_front.live_count && anycuda_front.live_streams[index];
}

static int anycuda_large_try(int kind, const void *send, void *recv, size_t count, int dtype, int op, int root,
                             void *handle, void *stream);
static int anycuda_large_unfinished(void);

/* 1 when the front answered the call (its status in *status), 0 when the Python must */
static int anycuda_front_try(int kind, const void *send, void *recv, size_t count, int dtype, int op, int root,
                             void *handle, void *stream, int *status) {
    if (anycuda_group_depth || !anycuda_front.busy || __atomic_load_n(anycuda_front.busy, __ATOMIC_ACQUIRE) ||
        !anycuda_stream_known_live(stream))
        return 0;
    /* a small operation may not pass large ones queued before it (large.c) */
    anycuda_small_op *o = anycuda_large_unfinished() ? NULL
                        : anycuda_small_op_for(kind, send, recv, count, dtype, op, root, handle);
    if (!o) {
        *status = NCCL_SUCCESS;
        return anycuda_large_try(kind, send, recv, count, dtype, op, root, handle, stream);
    }
    o->tag = anycuda_front.tag_base + (int)(o->shared->seq++ % (uint64_t)anycuda_front.tag_span);
    if ((kind == KIND_ALL_REDUCE || (kind == KIND_BROADCAST && o->rank == root)) && o->recv != o->send)
        memmove(o->recv, o->send, o->bytes);
    if (o->phases)                                /* one rank alone has none */
        anycuda_post_phase(o);
    struct timespec started;
    clock_gettime(CLOCK_MONOTONIC, &started);
    int done;
    long limit = anycuda_front.spin_ns + (long)(o->moved * anycuda_front.spin_ns_per_byte);
    while (!(done = anycuda_small_advance(o)) && anycuda_elapsed_ns(&started) < limit)
        ;
    if (done) {
        *status = o->error ? NCCL_REMOTE_ERROR : NCCL_SUCCESS;
        if (!o->error)
            __atomic_add_fetch(&o->shared->answered, 1, __ATOMIC_RELAXED);
        anycuda_nccl_front_free(o);
        return 1;
    }
    *status = anycuda_python_nccl_adopt(handle, stream, o);   /* its worker finishes and frees it */
    if (*status != NCCL_SUCCESS) {                /* not queued: the peers still wait for its messages */
        anycuda_nccl_front_finish(o);
        anycuda_nccl_front_free(o);
    }
    return 1;
}

/* ---- the entry points: the front first, else the library's Python */
__attribute__((visibility("default"))) int ncclGroupStart(void) {
    anycuda_group_depth++;
    return anycuda_python_ncclGroupStart();
}

__attribute__((visibility("default"))) int ncclGroupEnd(void) {
    if (anycuda_group_depth > 0)
        anycuda_group_depth--;
    return anycuda_python_ncclGroupEnd();
}

__attribute__((visibility("default"))) int ncclAllReduce(void *send, void *recv, size_t count, int dtype, int op,
                                                         void *comm, void *stream) {
    int status;
    if (anycuda_front_try(KIND_ALL_REDUCE, send, recv, count, dtype, op, 0, comm, stream, &status))
        return status;
    return anycuda_python_ncclAllReduce(send, recv, count, dtype, op, comm, stream);
}

__attribute__((visibility("default"))) int ncclBroadcast(void *send, void *recv, size_t count, int dtype, int root,
                                                         void *comm, void *stream) {
    int status;
    if (anycuda_front_try(KIND_BROADCAST, send, recv, count, dtype, 0, root, comm, stream, &status))
        return status;
    return anycuda_python_ncclBroadcast(send, recv, count, dtype, root, comm, stream);
}

__attribute__((visibility("default"))) int ncclBcast(void *buff, size_t count, int dtype, int root, void *comm,
                                                     void *stream) {
    int status;
    if (anycuda_front_try(KIND_BROADCAST, buff, buff, count, dtype, 0, root, comm, stream, &status))
        return status;
    return anycuda_python_ncclBcast(buff, count, dtype, root, comm, stream);
}

__attribute__((visibility("default"))) int ncclReduce(void *send, void *recv, size_t count, int dtype, int op,
                                                      int root, void *comm, void *stream) {
    int status;
    if (anycuda_front_try(KIND_REDUCE, send, recv, count, dtype, op, root, comm, stream, &status))
        return status;
    return anycuda_python_ncclReduce(send, recv, count, dtype, op, root, comm, stream);
}

__attribute__((visibility("default"))) int ncclAllGather(void *send, void *recv, size_t count, int dtype,
                                                         void *comm, void *stream) {
    int status;
    if (anycuda_front_try(KIND_ALL_GATHER, send, recv, count, dtype, 0, 0, comm, stream, &status))
        return status;
    return anycuda_python_ncclAllGather(send, recv, count, dtype, comm, stream);
}

__attribute__((visibility("default"))) int ncclReduceScatter(void *send, void *recv, size_t count, int dtype, int op,
                                                             void *comm, void *stream) {
    int status;
    if (anycuda_front_try(KIND_REDUCE_SCATTER, send, recv, count, dtype, op, 0, comm, stream, &status))
        return status;
    return anycuda_python_ncclReduceScatter(send, recv, count, dtype, op, comm, stream);
}
