/* libnccl's large collectives on a C thread of their own (compiled after front.c, whose
 * statics it uses).
 *
 * A collective above small.py's size goes by MPI's own collectives (its tuned algorithms), as
 * libraries/nccl/mpi.py calls them from a stream's worker. Through the stream, each one costs
 * the library's Python around MPI's call (the call queued, the worker's bookkeeping: some tens
 * of microseconds), and that is what a 1-2 MB all-reduce's bandwidth lost against MPI's
 * (NOTES "NCCL over MPI"). So where nothing of the Python's could come before it (no work
 * queued on any stream, no error kept, no capture: runtime/stream.busy reads 0), no group is
 * open and the call is one MPI answers as it is (a native type, sum/prod/max/min), the call is
 * queued here and returns: one thread per process runs such operations in call order with the
 * same MPI calls mpi.py makes (the same pieces, the same in-place forms), so a rank whose call
 * the Python answers still meets it.
 *
 * The streams must see this work: everything queued here and not yet handed over counts in
 * runtime/stream.foreign, which the runtime reads before it queues or waits for any work; where
 * it is not zero, the runtime asks the library's Python to hand it over
 * (libraries/nccl/front.py): `anycuda_nccl_large_claim` names the last ticket queued and its
 * stream, and a piece of work on that stream waits for the ticket (`anycuda_nccl_large_wait`).
 * Until that work has run, `busy` reads nonzero and every call goes through the Python, after
 * it. All operations queued here and not yet handed over are on one stream of one device (a
 * call on another goes through the Python, which hands these over first), so the order of one
 * stream is the order of this queue.
 *
 * An MPI failure is kept in the communicator's shared state (`error`), which its Python reports
 * as the communicator's asynchronous error. */
#include <limits.h>
#include <pthread.h>
#include <sched.h>

enum { ANYCUDA_SCHED_BATCH = 3 };         /* Linux's SCHED_BATCH (sched.h names it under _GNU_SOURCE only) */

typedef int (*anycuda_mpi_allreduce)(const void *, void *, int, intptr_t, intptr_t, intptr_t);
typedef int (*anycuda_mpi_allgather)(const void *, int, intptr_t, void *, int, intptr_t, intptr_t);
typedef int (*anycuda_mpi_reduce_scatter_block)(const void *, void *, int, intptr_t, intptr_t, intptr_t);
typedef int (*anycuda_mpi_bcast)(void *, int, intptr_t, int, intptr_t);
typedef int (*anycuda_mpi_reduce)(const void *, void *, int, intptr_t, intptr_t, int, intptr_t);

enum { ANYCUDA_NCCL_TYPES = 12, ANYCUDA_NCCL_OPS = 4 };

typedef struct anycuda_large_op {
    struct anycuda_large_op *next;
    int kind, dtype, op, root;
    size_t count;
    const char *send;
    char *recv;
    anycuda_nccl_shared *shared;
} anycuda_large_op;

static struct {
    anycuda_mpi_allreduce allreduce;
    anycuda_mpi_allgather allgather;
    anycuda_mpi_reduce_scatter_block reduce_scatter_block;
    anycuda_mpi_bcast bcast;
    anycuda_mpi_reduce reduce;
    intptr_t types[ANYCUDA_NCCL_TYPES];   /* the MPI datatype mpi4py gives each ncclDataType_t (0: none) */
    intptr_t ops[ANYCUDA_NCCL_OPS];       /* MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN */
    void *in_place;                       /* MPI_IN_PLACE */
    size_t piece_bytes;                   /* mpi.CHUNK_BYTES: all-reduces and broadcasts go in pieces */
    volatile long *foreign;               /* runtime/stream.foreign: queued here, not handed over */
    int ready;
    pthread_mutex_t lock;
    pthread_cond_t queued, finished;
    anycuda_large_op *head, *tail;
    uint64_t issued, done;                /* tickets: operations queued, finished */
    uint64_t wake_at;                     /* the first ticket a waiter waits for (0: none) */
    uint64_t handle;                      /* the communicator, stream and device of what is */
    uintptr_t stream;                     /* queued and not handed over */
    int device;
    int thread_started;
} anycuda_large = {.lock = PTHREAD_MUTEX_INITIALIZER, .queued = PTHREAD_COND_INITIALIZER,
                   .finished = PTHREAD_COND_INITIALIZER};

static int anycuda_nccl_large_setup(void *foreign, void *allreduce, void *allgather, void *reduce_scatter_block,
                                    void *bcast, void *reduce, intptr_t *types, intptr_t *ops, void *in_place,
                                    size_t piece_bytes) {
    anycuda_large.foreign = (volatile long *)foreign;
    anycuda_large.allreduce = (anycuda_mpi_allreduce)allreduce;
    anycuda_large.allgather = (anycuda_mpi_allgather)allgather;
    anycuda_large.reduce_scatter_block = (anycuda_mpi_reduce_scatter_block)reduce_scatter_block;
    anycuda_large.bcast = (anycuda_mpi_bcast)bcast;
    anycuda_large.reduce = (anycuda_mpi_reduce)reduce;
    memcpy(anycuda_large.types, types, sizeof anycuda_large.types);
    memcpy(anycuda_large.ops, ops, sizeof anycuda_large.ops);
    anycuda_large.in_place = in_place;
    anycuda_large.piece_bytes = piece_bytes;
    __atomic_store_n(&anycuda_large.ready, 1, __ATOMIC_RELEASE);
    return 0;
}

/* ---- the MPI calls of libraries/nccl/mpi.py, call for call */

/* an all-reduce or a broadcast over pieces of piece_bytes, as mpi.MpiGroup._pieces makes them */
static int anycuda_large_pieces(const anycuda_large_op *o, size_t size) {
    int bytes = o->kind == KIND_BROADCAST;       /* a broadcast moves bytes, an all-reduce elements */
    size_t step = anycuda_large.piece_bytes / (bytes ? 1 : size), total = bytes ? o->count * size : o->count;
    intptr_t comm = o->shared->mpi_comm;
    if (step == 0)
        step = 1;
    for (size_t at = 0; at < total; at += step) {
        int n = (int)(total - at < step ? total - at : step), e;
        if (o->kind == KIND_BROADCAST)
            e = anycuda_large.bcast(o->recv + at, n, anycuda_front.byte, o->root, comm);
        else
            e = anycuda_large.allreduce(o->send == o->recv ? anycuda_large.in_place : (const void *)(o->send + at * size),
                                        o->recv + at * size, n, anycuda_large.types[o->dtype],
                                        anycuda_large.ops[o->op], comm);
        if (e)
            return e;
    }
    return 0;
}

static int anycuda_large_run(const anycuda_large_op *o) {
    size_t size = anycuda_type_size(o->dtype), bytes = o->count * size;
    intptr_t comm = o->shared->mpi_comm, type = anycuda_large.types[o->dtype];
    int rank = o->shared->rank;
    switch (o->kind) {
    case KIND_ALL_REDUCE:
        return anycuda_large_pieces(o, size);
    case KIND_BROADCAST:
        if (rank == o->root && o->send != o->recv)
            memmove(o->recv, o->send, bytes);
        return anycuda_large_pieces(o, size);
    case KIND_REDUCE:
        return anycuda_large.reduce(o->send, rank == o->root ? o->recv : NULL, (int)o->count, type,
                                    anycuda_large.ops[o->op], o->root, comm);
    case KIND_ALL_GATHER:
        if (o->send == o->recv + rank * bytes)
            return anycuda_large.allgather(anycuda_large.in_place, 0, anycuda_front.byte, o->recv, (int)bytes,
                                           anycuda_front.byte, comm);
        return anycuda_large.allgather(o->send, (int)bytes, anycuda_front.byte, o->recv, (int)bytes,
                                       anycuda_front.byte, comm);
    default:                                      /* KIND_REDUCE_SCATTER */
        return anycuda_large.reduce_scatter_block(o->send, o->recv, (int)o->count, type, anycuda_large.ops[o->op],
                                                  comm);
    }
}

static void *anycuda_large_thread(void *unused) {
    (void)unused;
    /* Woken by the first of a run of calls, a thread of the normal policy takes the caller's
     * core at once (where a launcher binds each rank to one core), and the calls after it
     * wait for MPI's busy polling to yield: batch policy wakes without preempting. */
    struct sched_param none = {0};
    pthread_setschedparam(pthread_self(), ANYCUDA_SCHED_BATCH, &none);
    for (;;) {
        pthread_mutex_lock(&anycuda_large.lock);
        while (!anycuda_large.head)
            pthread_cond_wait(&anycuda_large.queued, &anycuda_large.lock);
        anycuda_large_op *o = anycuda_large.head;
        anycuda_large.head = o->next;
        if (!anycuda_large.head)
            anycuda_large.tail = NULL;
        pthread_mutex_unlock(&anycuda_large.lock);
        int e = anycuda_large_run(o);
        if (e)                                    /* the first failure stays (front.py reports it) */
            __sync_bool_compare_and_swap(&o->shared->error, 0, e);
        else
            __atomic_add_fetch(&o->shared->threaded, 1, __ATOMIC_RELAXED);
        pthread_mutex_lock(&anycuda_large.lock);
        uint64_t done = __atomic_add_fetch(&anycuda_large.done, 1, __ATOMIC_RELEASE);
        if (anycuda_large.wake_at && done >= anycuda_large.wake_at) {
            /* only then: a waiter woken after every operation takes the core from this thread */
            anycuda_large.wake_at = 0;
            pthread_cond_broadcast(&anycuda_large.finished);
        }
        pthread_mutex_unlock(&anycuda_large.lock);
        free(o);
    }
    return NULL;
}

/* ---- which calls are queued here */

/* whether a call moves more than small.py's limit (small.applies' rule, negated) */
static int anycuda_large_size(int kind, size_t count, size_t size, int nranks) {
    int blocks = kind == KIND_ALL_GATHER || kind == KIND_REDUCE_SCATTER ? nranks : 1;
    return nranks > ANYCUDA_MAX_RANKS || count * size * (size_t)blocks > anycuda_front.small_bytes;
}

/* whether the call is one this thread runs as mpi.py would; 0 sends it to the Python (which
 * checks its arguments, copies overlapping buffers, widens other types) */
static int anycuda_large_fits(int kind, const char *send, const char *recv, size_t count, int dtype, int op, int root,
                              const anycuda_nccl_shared *s) {
    size_t size = dtype >= 0 && dtype < ANYCUDA_NCCL_TYPES && anycuda_large.types[dtype] ? anycuda_type_size(dtype) : 0;
    int n = s->nranks, rank = s->rank;
    int reduces = kind == KIND_ALL_REDUCE || kind == KIND_REDUCE || kind == KIND_REDUCE_SCATTER;
    if (!size || count == 0 || (reduces && (op < 0 || op >= ANYCUDA_NCCL_OPS)) || root < 0 || root >= n
            || !anycuda_large_size(kind, count, size, n))
        return 0;
    size_t bytes = count * size;
    int sends = kind != KIND_BROADCAST || rank == root, receives = kind != KIND_REDUCE || rank == root;
    if ((sends && !send) || (receives && !recv))
        return 0;
    switch (kind) {
    case KIND_REDUCE:                             /* into the root's buffer, apart from its input */
        return count <= INT_MAX && (rank != root || !anycuda_overlaps(send, bytes, recv, bytes));
    case KIND_ALL_GATHER:                         /* in place, or apart */
        return bytes <= INT_MAX && (send == recv + rank * bytes || !anycuda_overlaps(send, bytes, recv, n * bytes));
    case KIND_REDUCE_SCATTER:
        return count <= INT_MAX && !anycuda_overlaps(send, n * bytes, recv, bytes);
    default:                                      /* all-reduce and broadcast: in pieces */
        return 1;
    }
}

static int anycuda_large_start_thread(void) {
    if (anycuda_large.thread_started)
        return 1;
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    int ok = pthread_create(&thread, &attributes, anycuda_large_thread, NULL) == 0;
    pthread_attr_destroy(&attributes);
    anycuda_large.thread_started = ok;
    return ok;
}

/* 1 when the call was queued here (ncclSuccess), 0 when the Python must answer it. The caller
 * has checked what front.c's small path checks first (no group, nothing queued, a live stream). */
static int anycuda_large_try(int kind, const void *send, void *recv, size_t count, int dtype, int op, int root,
                             void *handle, void *stream) {
    if (!__atomic_load_n(&anycuda_large.ready, __ATOMIC_ACQUIRE) || !handle
            || (uintptr_t)stream == 2)           /* CU_STREAM_PER_THREAD: another thread's is another stream */
        return 0;
    anycuda_nccl_shared *s = anycuda_front_find(handle);
    if (!s || !s->enabled || s->error
            || !anycuda_large_fits(kind, (const char *)send, (const char *)recv, count, dtype, op, root, s))
        return 0;
    anycuda_large_op *o = calloc(1, sizeof *o);
    if (!o)
        return 0;
    o->kind = kind, o->dtype = dtype, o->op = op, o->root = root, o->count = count;
    o->send = (const char *)send, o->recv = (char *)recv, o->shared = s;
    uintptr_t on = (uintptr_t)stream == 0 ? 1 : (uintptr_t)stream;      /* NCCL's stream 0: the legacy one */
    pthread_mutex_lock(&anycuda_large.lock);
    int pending = anycuda_large.done != anycuda_large.issued && *anycuda_large.foreign;
    if ((pending && (anycuda_large.stream != on || anycuda_large.device != s->device))
            || !anycuda_large_start_thread()) {
        pthread_mutex_unlock(&anycuda_large.lock);
        free(o);
        return 0;                                 /* the Python hands the queued ones over first */
    }
    anycuda_large.stream = on, anycuda_large.device = s->device, anycuda_large.handle = s->handle;
    if (anycuda_large.tail)
        anycuda_large.tail->next = o;
    else
        anycuda_large.head = o;
    anycuda_large.tail = o;
    __atomic_add_fetch(&anycuda_large.issued, 1, __ATOMIC_RELEASE);
    __atomic_add_fetch(anycuda_large.foreign, 1, __ATOMIC_RELEASE);
    pthread_cond_signal(&anycuda_large.queued);
    pthread_mutex_unlock(&anycuda_large.lock);
    return 1;
}

/* whether operations queued here have not finished (the small path must not pass them) */
static int anycuda_large_unfinished(void) {
    return __atomic_load_n(&anycuda_large.ready, __ATOMIC_ACQUIRE)
        && __atomic_load_n(&anycuda_large.done, __ATOMIC_ACQUIRE) != __atomic_load_n(&anycuda_large.issued, __ATOMIC_ACQUIRE);
}

/* ---- for the Python (front.py) */

/* the work queued here and not yet handed over: the ticket that ends it (0: none), with its
 * communicator, stream and device; from now on it is the stream's */
static uint64_t anycuda_nccl_large_claim(uint64_t *handle, uintptr_t *stream, int *device) {
    pthread_mutex_lock(&anycuda_large.lock);
    uint64_t ticket = *anycuda_large.foreign ? anycuda_large.issued : 0;
    *handle = anycuda_large.handle, *stream = anycuda_large.stream, *device = anycuda_large.device;
    __atomic_store_n(anycuda_large.foreign, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&anycuda_large.lock);
    return ticket;
}

/* what anycuda_nccl_large_claim would name, left where it is */
static uint64_t anycuda_nccl_large_pending(uint64_t *handle, uintptr_t *stream, int *device) {
    pthread_mutex_lock(&anycuda_large.lock);
    uint64_t ticket = *anycuda_large.foreign ? anycuda_large.issued : 0;
    *handle = anycuda_large.handle, *stream = anycuda_large.stream, *device = anycuda_large.device;
    pthread_mutex_unlock(&anycuda_large.lock);
    return ticket;
}

/* wait (without the GIL) until the operations up to `ticket` have finished */
static void anycuda_nccl_large_wait(uint64_t ticket) {
    pthread_mutex_lock(&anycuda_large.lock);
    while (anycuda_large.done < ticket) {
        if (!anycuda_large.wake_at || ticket < anycuda_large.wake_at)
            anycuda_large.wake_at = ticket;      /* (every waiter woken says its ticket again) */
        pthread_cond_wait(&anycuda_large.finished, &anycuda_large.lock);
    }
    pthread_mutex_unlock(&anycuda_large.lock);
}

/* the ticket of the last operation queued here (what waiting for everything waits for) */
static uint64_t anycuda_nccl_large_issued(void) {
    pthread_mutex_lock(&anycuda_large.lock);
    uint64_t ticket = anycuda_large.issued;
    pthread_mutex_unlock(&anycuda_large.lock);
    return ticket;
}

/* the ticket of the last operation finished */
static uint64_t anycuda_nccl_large_done(void) {
    return __atomic_load_n(&anycuda_large.done, __ATOMIC_ACQUIRE);
}
