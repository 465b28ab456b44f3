/*
 * internal.h: state and helpers shared by the simulated driver's translation units.
 *
 * Rules every file follows:
 * - Exported entry points are thin: API_ENTER (fault injection, init check), then one call of a
 *   hidden function under the global lock. Nothing inside the library ever calls an exported
 *   entry point, so an interposer sees exactly the calls the client made, and fault-injection
 *   counters count exactly those calls.
 * - Functions named *_locked or documented "lock held" expect the global mutex to be held.
 * - Objects behind handles are never freed (only marked dead), so a stale handle can always be
 *   recognised and answered with an error instead of a use-after-free.
 */
#ifndef SIMCUDA_INTERNAL_H
#define SIMCUDA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "simcuda.h"

#define HIDDEN __attribute__((visibility("hidden")))
#define SIM_MAX_DEVICES 8

/* ---- configuration, faults, lock (config.c) ---------------------------------------------- */

struct sim_config {
    int devices;         /* SIMCUDA_DEVICES */
    uint64_t mem_bytes;  /* SIMCUDA_MEM_BYTES, per device */
    int driver_version;  /* SIMCUDA_DRIVER_VERSION */
};

HIDDEN extern struct sim_config g_cfg;

/* Loads the configuration once; safe to call from any entry point. */
HIDDEN void sim_config_load(void);
/* Counts one call of exported function `fn` and returns the injected error, or CUDA_SUCCESS. */
HIDDEN CUresult sim_fault(const char *fn);
/* sim_fault, then CUDA_ERROR_NOT_INITIALIZED unless cuInit succeeded. */
HIDDEN CUresult sim_enter(const char *fn);
HIDDEN bool sim_initialized(void);
HIDDEN CUresult sim_init_locked(unsigned int flags);
HIDDEN void sim_lock(void);
HIDDEN void sim_unlock(void);
HIDDEN const char *sim_error_name(CUresult e);
HIDDEN const char *sim_error_string(CUresult e);

#define API_ENTER_NOINIT()                            \
    do {                                              \
        CUresult fault_ = sim_fault(__func__);        \
        if (fault_ != CUDA_SUCCESS) return fault_;    \
    } while (0)

#define API_ENTER()                                   \
    do {                                              \
        CUresult enter_ = sim_enter(__func__);        \
        if (enter_ != CUDA_SUCCESS) return enter_;    \
    } while (0)

/* Runs `call` (a hidden function returning CUresult) under the global lock and returns. */
#define API_LOCKED(call)                              \
    do {                                              \
        sim_lock();                                   \
        CUresult locked_ = (call);                    \
        sim_unlock();                                 \
        return locked_;                               \
    } while (0)

/* API_LOCKED, then the destructors of user objects whose last reference the call dropped
 * (userobj.c), run unlocked. */
#define API_LOCKED_THEN_DESTRUCTORS(call)             \
    do {                                              \
        sim_lock();                                   \
        CUresult locked_ = (call);                    \
        sim_unlock();                                 \
        userobj_after_unlock();                       \
        return locked_;                               \
    } while (0)

/* ---- handles and sorted range tables (table.c) ------------------------------------------- */

enum hkind {
    HK_CTX = 1,
    HK_STREAM,
    HK_EVENT,
    HK_MODULE,
    HK_FUNC,
    HK_LIB,
    HK_KERNEL,
    HK_POOL,
    HK_ARRAY,
    HK_GRAPH,
    HK_PHYS,
    HK_GRAPH_EXEC,
    HK_NODE,
    HK_MIPMAPPED,
    HK_USER_OBJECT,
    HK_EXTMEM,
    HK_EXTSEM,
    HK_COUNT
};

/* First member of every object that a handle names. */
struct hdr {
    enum hkind kind;
    bool alive;
    uint64_t handle;
};

/* Makes room for `need` elements of `elem` bytes in *v (capacity *cap, doubled as needed). */
HIDDEN bool sim_grow(void **v, size_t *cap, size_t need, size_t elem);
/* Allocates a zeroed object of `size` bytes (starting with struct hdr) and gives it a handle. */
HIDDEN void *obj_new(enum hkind kind, size_t size);
/* The live object of that kind named by `handle`, or NULL. */
HIDDEN void *obj_get(enum hkind kind, uint64_t handle);
HIDDEN size_t obj_count(enum hkind kind);
HIDDEN void *obj_at(enum hkind kind, size_t index);

#define H(obj) ((obj)->h.handle)

struct range {
    uint64_t addr;
    uint64_t size;
    void *obj;
};

/* Non-overlapping ranges sorted by address. */
struct rtab {
    struct range *v;
    size_t n;
    size_t cap;
};

HIDDEN bool rtab_insert(struct rtab *t, uint64_t addr, uint64_t size, void *obj);
HIDDEN bool rtab_remove(struct rtab *t, uint64_t addr);
HIDDEN struct range *rtab_find(const struct rtab *t, uint64_t addr);
HIDDEN struct range *rtab_exact(const struct rtab *t, uint64_t addr);
HIDDEN bool rtab_overlaps(const struct rtab *t, uint64_t addr, uint64_t size);
/* Lowest `align`-aligned start in [lo, hi) where `size` bytes fit between the ranges. */
HIDDEN bool rtab_first_fit(const struct rtab *t, uint64_t lo, uint64_t hi, uint64_t size,
                           uint64_t align, uint64_t *out);

HIDDEN uint64_t round_up(uint64_t v, uint64_t align);

/* ---- address map ------------------------------------------------------------------------- */

/* Device d's memory lives at [DEV_BASE(d), DEV_BASE(d) + mem_bytes): never host-addressable. */
#define DEV_BASE(d) (0x700000000000ull + (uint64_t)(d) * 0x10000000000ull)
#define DEV_SPAN 0x10000000000ull
#define VMM_BASE 0x600000000000ull /* cuMemAddressReserve ranges */
#define VMM_SPAN 0x40000000000ull
#define IPC_BASE 0x580000000000ull /* cuIpcOpenMemHandle aliases */
#define IPC_SPAN 0x10000000000ull
#define GRAPH_BASE 0x5a0000000000ull /* addresses of allocations made under stream capture */
#define GRAPH_SPAN 0x10000000000ull
#define HEAP_ALIGN 256u
#define PITCH_ALIGN 512u
#define VMM_GRANULARITY (2u * 1024u * 1024u)

/* ---- devices and contexts (context.c) ---------------------------------------------------- */

struct ctx {
    struct hdr h;
    int dev;
    unsigned int flags;
    bool primary;
    int refs;            /* primary contexts: retain count */
    unsigned long long id;
};

struct pool;

struct device {
    struct ctx *primary;
    struct pool *default_pool;
    struct pool *current_pool;
    struct rtab heap;    /* allocations (struct alloc) in [DEV_BASE, DEV_BASE + mem_bytes) */
    uint64_t used;       /* bytes of heap blocks in use */
    char *arena;         /* host backing of the whole heap, mapped on first use */
};

HIDDEN extern struct device g_dev[SIM_MAX_DEVICES];

HIDDEN CUresult dev_check(CUdevice dev);
/* The calling thread's current context, which must be usable. */
HIDDEN CUresult ctx_current(struct ctx **out);
/* `handle` if non-NULL (must be usable), else the current context. */
HIDDEN CUresult ctx_resolve(CUcontext handle, struct ctx **out);
HIDDEN bool ctx_usable(const struct ctx *c);
HIDDEN void ctx_sync(struct ctx *c);

/* ---- memory (memory.c, host.c) ----------------------------------------------------------- */

enum akind { AK_DEVICE, AK_PITCH, AK_MANAGED, AK_ASYNC, AK_ARRAY, AK_PHYS, AK_GRAPH };

/* One block of a device heap. */
struct alloc {
    enum akind kind;
    int dev;
    struct ctx *ctx;     /* owning context; NULL for VMM physical memory */
    struct pool *pool;   /* AK_ASYNC */
    bool cached;         /* AK_ASYNC: freed into the pool, still reserved */
    uint64_t addr;
    uint64_t size;       /* bytes asked for */
    uint64_t block;      /* bytes taken from the heap */
    void *host;          /* AK_MANAGED: the host mapping handed to the client */
    void *owner;         /* AK_ARRAY: struct array or mipmapped array; AK_PHYS: struct phys */
    uint64_t serial;     /* unique per allocation, so a stale IPC handle is recognised */
};

HIDDEN CUresult heap_alloc(int dev, uint64_t size, uint64_t align, enum akind kind,
                           struct ctx *ctx, struct alloc **out);
HIDDEN void heap_release(struct alloc *a);
HIDDEN char *heap_host(const struct alloc *a);
/* The live allocation whose block contains addr, or NULL. */
HIDDEN struct alloc *heap_find(uint64_t addr);
HIDDEN CUresult mem_free_locked(CUdeviceptr dptr);
/* Frees a device, pitch, stream-ordered or managed allocation by its base address. */
HIDDEN CUresult mem_free_ptr(CUdeviceptr dptr);
HIDDEN CUresult mem_alloc_locked(CUdeviceptr *dptr, size_t size, enum akind kind);

/* How a copy's side may be addressed: device memory a client allocated, any host or device
 * memory (host and unified sides), or an array's memory (reached only through its handle). */
enum xmode { X_DEV_READ, X_DEV_WRITE, X_ANY_READ, X_ANY_WRITE, X_ARRAY_READ, X_ARRAY_WRITE };
/* Resolves [addr, addr + n) piece by piece: host pointer of addr and the bytes contiguous there. */
HIDDEN CUresult xlate(uint64_t addr, size_t n, enum xmode mode, char **host, size_t *contig);
HIDDEN CUresult mem_copy_locked(uint64_t dst, enum xmode dmode, uint64_t src, enum xmode smode,
                                size_t n);
/* mem_copy_locked's checks alone: whether the copy would succeed, touching nothing. */
HIDDEN CUresult mem_copy_valid(uint64_t dst, enum xmode dmode, uint64_t src, enum xmode smode,
                               size_t n);
HIDDEN CUresult mem_set_locked(uint64_t dst, const void *pattern, size_t elem, size_t count);
/* A 2D memset: `rows` rows of `count` elements, `pitch` bytes apart (pitch unused for one row). */
HIDDEN CUresult mem_set_rows_locked(uint64_t dst, size_t pitch, const void *pattern, size_t elem,
                                    size_t count, size_t rows);

/* Host ranges known to the driver: pinned allocations, registrations, managed memory. */
enum hrkind { HR_PINNED, HR_REGISTERED, HR_MANAGED };
struct hostrange {
    enum hrkind kind;
    unsigned int flags;
    struct ctx *ctx;
    struct alloc *managed;
    size_t maplen;       /* HR_PINNED / HR_MANAGED: length of the mmap */
};
HIDDEN extern struct rtab g_host;
HIDDEN void host_ctx_teardown(struct ctx *c);
HIDDEN void mem_ctx_teardown(struct ctx *c);
HIDDEN void host_unmap_range(struct range *r);

/* ---- stream-ordered pools (pool.c) ------------------------------------------------------- */

struct pool {
    struct hdr h;
    int dev;
    bool is_default;
    bool destroyed;
    uint64_t threshold;
    uint64_t used, used_high, reserved, reserved_high;
    int reuse[3];
    CUmemAccess_flags access[SIM_MAX_DEVICES];
    struct alloc **cache;
    size_t ncache, capcache;
    CUmemPoolProps props;
    struct pool *imported_from; /* a pool imported from a shareable handle: its exporter's */
};

HIDDEN struct pool *pool_new_default(int dev);
HIDDEN CUresult pool_alloc_locked(struct pool *p, struct ctx *c, size_t size, uint64_t *out);
HIDDEN void pool_free_alloc(struct alloc *a);
HIDDEN void pool_drop_alloc(struct alloc *a);
HIDDEN void pools_sync(int dev);
HIDDEN void pools_release_cached(int dev);

/* ---- copies (copy.c) --------------------------------------------------------------------- */

/* A copy of `height` rows of `width` bytes in each of `depth` slices (1D copies: 1 x 1). Row y
 * of slice z starts at base + (z * slice_rows + y) * pitch on each side. */
struct xfer {
    uint64_t dst, src;
    enum xmode dmode, smode;
    size_t dpitch, spitch;
    size_t drows, srows;  /* rows per slice (3D copies) */
    size_t width, height, depth;
};

/* Runs a copy under the lock: every row is checked before any byte moves. */
HIDDEN CUresult xfer_run_locked(const struct xfer *x);
/* A synchronous copy, and an asynchronous one on stream s (appended to the graph of a
 * capturing stream as a node of descriptor d). */
HIDDEN CUresult xfer_sync(const struct xfer *x);
HIDDEN CUresult xfer_async(const struct xfer *x, const CUDA_MEMCPY3D *d, CUstream s, bool ptsz);

/* ---- streams, capture (stream.c), events (event.c), graphs as built (graphstore.c), ------ */
/* ---- executable graphs and host functions (graph.c) --------------------------------------- */

struct stream;
struct graph;
struct depset;

/* One operation captured into a graph, replayed by cuGraphLaunch. */
enum node_kind {
    N_COPY,
    N_SET,
    N_KERNEL,
    N_HOST,
    N_ALLOC,
    N_FREE,
    N_CHILD,
    N_EVENT_RECORD,
    N_EVENT_WAIT,
    N_MEMOP,      /* one operation of a captured stream memory operation (memop.c) */
    N_SEM_SIGNAL, /* one semaphore of a captured signal (semaphore.c) */
    N_SEM_WAIT    /* one semaphore of a captured wait */
};

typedef void (*sim_host_fn)(void *userData);

struct node {
    enum node_kind kind;
    struct ctx *ctx;                /* N_COPY, N_SET, N_KERNEL: the context it runs in */
    struct xfer copy;               /* N_COPY: what runs */
    CUDA_MEMCPY3D desc;             /* N_COPY: the copy as described (memory types, offsets) */
    uint64_t dst;                   /* N_SET */
    unsigned char pattern[4];       /* N_SET */
    size_t elem, count;             /* N_SET: elements per row */
    size_t pitch, rows;             /* N_SET: rows (1 for a 1D memset), pitch bytes apart */
    int kernel;                     /* N_KERNEL: a built-in kernel (module.c) */
    uint64_t kparams[3];            /* N_KERNEL: pointer, value, n */
    uint64_t func, kern;            /* N_KERNEL: the CUfunction (or CUkernel) it was given */
    unsigned int grid[3], block[3]; /* N_KERNEL: runs gridDimX * blockDimX threads */
    unsigned int shmem;             /* N_KERNEL: dynamic shared memory, unused */
    /* In an executable graph: disabled by cuGraphNodeSetEnabled (runs as an empty node). */
    bool disabled;
    sim_host_fn fn;                 /* N_HOST */
    void *data;                     /* N_HOST */
    uint64_t maddr;                 /* N_ALLOC: the fixed address; N_FREE: what it frees */
    uint64_t msize;                 /* N_ALLOC */
    int mdev;                       /* N_ALLOC */
    struct graph *child;            /* N_CHILD: the embedded graph, owned by the node */
    uint64_t event;                 /* N_EVENT_RECORD, N_EVENT_WAIT: the CUevent */
    CUstreamBatchMemOpParams memop; /* N_MEMOP: the operation */
    uint64_t sem, sem_value;        /* N_SEM_SIGNAL, N_SEM_WAIT: the semaphore, a signal's value */
    uint64_t handle;                /* its CUgraphNode (an HK_NODE object) */
    /* In an executable graph: the top-level child graph node (CUgraphNode) whose graph this
     * node was flattened from, or 0 for a node of the instantiated graph itself; what
     * cuGraphExecChildGraphNodeSetParams replaces. 0 in graphs. */
    uint64_t owner;
};

/* A captured memory operation, run by a launch (memop.c); the operation was checked when
 * it was captured, but its memory may be gone since. */
HIDDEN CUresult memop_run_locked(const CUstreamBatchMemOpParams *p);
/* A captured signal or wait of an external semaphore, run by a launch (semaphore.c): nothing
 * if the semaphore was destroyed since. */
HIDDEN void semaphore_signal_locked(uint64_t sem, uint64_t value);
HIDDEN void semaphore_wait_locked(uint64_t sem);

/* An executable graph: the instantiated graph's nodes, child graphs flattened in place. */
struct graph_exec {
    struct hdr h;
    struct ctx *ctx;
    struct graph *source; /* the graph it was instantiated from (maybe destroyed since) */
    struct node *nodes;   /* never freed, so a launch running a host function unlocked is safe */
    size_t n;
    bool auto_free;
    bool memory;          /* has memory nodes */
};

/* What an operation on a stream argument resolved to. */
struct sref {
    struct ctx *ctx;
    struct stream *st;   /* NULL for the legacy and per-thread default streams */
    bool capturing;
};

HIDDEN CUresult stream_ref(CUstream s, bool ptsz, struct sref *out);
/* The event is recorded now, outside any capture (cuEventRecord, an event record node at a
 * launch, cuCtxRecordEvent); nothing if it was destroyed. */
HIDDEN void event_mark_recorded(uint64_t event);
/* Appends an operation to the graph a capturing stream builds, depending on every node of the
 * stream's current dependencies, which become that node alone. */
HIDDEN CUresult stream_capture_node(struct sref *r, const struct node *n);
/* A stream's capture: its status and, while capturing (or invalidated), its id, graph and (if
 * deps is not NULL) the stream's own current dependencies (else NULL). */
HIDDEN CUresult stream_capture_state(CUstream h, CUstreamCaptureStatus *status, uint64_t *id,
                                     struct graph **g, struct depset **deps);
/* A stream-ordered allocation under capture: an allocation node of `size` bytes on the
 * capturing context's device; its fixed address in *out. */
HIDDEN CUresult stream_capture_alloc(struct sref *r, size_t size, CUdeviceptr *out);
/* A stream-ordered free under capture: a free node, for an allocation of this capture or any
 * address an allocation node was given; false (nothing added) for any other address. */
HIDDEN bool stream_capture_free(struct sref *r, uint64_t addr);
HIDDEN uint64_t graph_next_address(size_t size);
/* Whether an allocation node was ever given addr. */
HIDDEN bool graph_node_address(uint64_t addr);
/* A graph built by hand (cuGraphCreate) in context c. */
HIDDEN struct graph *graph_new(struct ctx *c);
HIDDEN CUgraph graph_handle(const struct graph *g);
/* Appends a node to a graph built by hand, with an edge from each of its ndeps dependencies
 * (which the caller checked with graph_owns_nodes); its handle is written to *out. */
HIDDEN CUresult graph_add_node(struct graph *g, struct node *n, const CUgraphNode *deps,
                               size_t ndeps, CUgraphNode *out);
/* The node a CUgraphNode names, or NULL. */
HIDDEN const struct node *graph_node_get(CUgraphNode h);
/* The same, to change its parameters in place; *g (if g is not NULL) is its graph. */
HIDDEN struct node *graph_node_get_mut(CUgraphNode h, struct graph **g);
/* Whether every one of the n handles is a node of g, none twice (a dependency array may not
 * have duplicate entries). */
HIDDEN bool graph_owns_nodes(const struct graph *g, const CUgraphNode *deps, size_t n);
/* The index in g's node order of the node h names, if it is a node of g. */
HIDDEN bool graph_node_index(const struct graph *g, CUgraphNode h, size_t *index);

/* An edge of a graph: node `to` depends on node `from` (indices in the graph's node order;
 * nodes are never removed, so indices are stable). A graph keeps its edges in the order they
 * were made (graph.c's node adds, capture.c's captures, graphedge.c's cuGraphAddDependencies). */
struct edge {
    size_t from, to;
};
HIDDEN const struct edge *graph_edges(const struct graph *g, size_t *n);
/* Room for `more` edges, so that graph_edge_push cannot fail; false if out of memory. */
HIDDEN bool graph_edges_reserve(struct graph *g, size_t more);
HIDDEN void graph_edge_push(struct graph *g, size_t from, size_t to);
/* Drops the edges made after the first n (a refused cuGraphAddDependencies). */
HIDDEN void graph_edges_truncate(struct graph *g, size_t n);
/* An order of g's nodes in which every node comes after those it depends on: node order, the
 * smallest ready index first, so node order itself when every edge goes forward (then *order
 * is NULL). CUDA_ERROR_INVALID_VALUE if the edges have a cycle, or out of memory. */
HIDDEN CUresult graph_order(const struct graph *g, size_t **order);

/* A capture's current dependencies on one stream, or what an event recorded in a capture
 * remembers of them: node indices of the capture's graph, each once, in the order they were
 * added (capture.c). */
struct depset {
    size_t *v;
    size_t n, cap;
};
/* Room for `more` indices (false if out of memory). */
HIDDEN bool depset_reserve(struct depset *s, size_t more);
/* Adds an index not already there (after depset_reserve: cannot fail). */
HIDDEN void depset_add(struct depset *s, size_t index);
/* The set becomes a copy of the n indices at v / gains from's indices; false (unchanged) if
 * out of memory. */
HIDDEN bool depset_assign(struct depset *s, const size_t *v, size_t n);
HIDDEN bool depset_union(struct depset *s, const struct depset *from);

/* A created stream (stream.c). */
struct stream {
    struct hdr h;
    struct ctx *ctx;
    unsigned int flags;
    int priority;
    CUstreamCaptureStatus capture;
    CUstreamCaptureMode mode;
    struct graph *graph;
    uint64_t capture_id; /* of the capture under way (or invalidated), unique in the process */
    struct stream *origin; /* for a stream that joined a capture: the stream that began it */
    bool graph_given;      /* captured into the program's graph (cuStreamBeginCaptureToGraph) */
    struct depset deps;    /* while capturing: what its next captured node depends on */
};

/* An event (event.c). */
struct event {
    struct hdr h;
    struct ctx *ctx;
    unsigned int flags;
    bool recorded;
    struct timespec when;
    /* Last recorded on a capturing stream: that capture's id and origin stream (else 0, NULL). */
    uint64_t capture_id;
    struct stream *capture_origin;
    struct depset deps; /* the recording stream's current dependencies then */
};

/* A capture gone wrong: the stream's, and the one of the stream that began it when it joined
 * one (stream.c). */
HIDDEN void stream_capture_invalidate(struct stream *st);
/* The capture under way whose event ev is (its origin stream), or NULL (event.c). */
HIDDEN struct stream *event_capture(const struct event *ev);
/* Appends a node with no edges to g; its handle in *out if out is not NULL. */
HIDDEN CUresult graph_node_append(struct graph *g, struct node *n, CUgraphNode *out);
/* The graph of an invalidated capture, thrown away. */
HIDDEN void graph_discard(struct graph *g);
/* Whether graph g has an allocation node at addr that no free node of g frees yet. */
HIDDEN bool graph_alloc_unfreed(const struct graph *g, uint64_t addr);
/* Whether g or a child graph within it has memory nodes. */
HIDDEN bool graph_has_memory_nodes(const struct graph *g);
/* Adds a child graph node to g: a clone of child (which must have no memory nodes), or, with
 * move, child itself, which g then owns (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE). */
HIDDEN CUresult graph_add_child(struct graph *g, struct graph *child, bool move,
                                const CUgraphNode *deps, size_t ndeps, CUgraphNode *out);
/* Whether g is owned by a child graph node (moved into a parent). */
HIDDEN bool graph_is_child(const struct graph *g);
/* The node of `clone` (a child graph node's copy of a graph) made from node `original` of the
 * graph it copies, in *out; false if there is none. */
HIDDEN bool graph_find_in_clone(CUgraphNode original, const struct graph *clone,
                                CUgraphNode *out);
/* g's nodes with every child graph node replaced by the child's nodes, at any depth: a new
 * array of *n nodes (NULL when *n is 0), or CUDA_ERROR_OUT_OF_MEMORY. */
HIDDEN CUresult graph_flatten(const struct graph *g, struct node **out, size_t *n);
/* The executable graph made from g that is alive, or 0 (one at a time for graphs with
 * memory nodes). */
HIDDEN uint64_t graph_instance(const struct graph *g);
HIDDEN void graph_set_instance(struct graph *g, uint64_t exec);
/* Graph memory (graph.c): translation of, and frees of, addresses a launch allocated. */
HIDDEN CUresult graph_mem_xlate(uint64_t addr, size_t n, char **host, size_t *contig);
HIDDEN bool graph_mem_free(uint64_t addr);
HIDDEN void stream_ctx_teardown(struct ctx *c);
/* The graph a capture ended with (a live HK_GRAPH handle), or NULL. */
HIDDEN struct graph *graph_get(CUgraph h);
HIDDEN struct ctx *graph_ctx(const struct graph *g);
HIDDEN const struct node *graph_nodes(const struct graph *g, size_t *n);
HIDDEN void graph_ctx_teardown(struct ctx *c);
/* Graph exec e takes references to every user object that g and its child graphs hold. */
HIDDEN bool graph_user_objects_to(const struct graph *g, uint64_t exec);
/* The CUgraphNodeType of a node kind (graph.c). */
HIDDEN CUgraphNodeType node_kind_type(enum node_kind kind);
/* The live event a CUevent names, as a handle value, or 0. */
HIDDEN uint64_t event_handle(CUevent h);
/* cuGraphAddNode's event record and wait nodes (graphnode.c): kind N_EVENT_RECORD or
 * N_EVENT_WAIT. */
HIDDEN CUresult graph_add_event_node(CUgraphNode *out, CUgraph h, const CUgraphNode *deps,
                                     size_t ndeps, CUevent event, enum node_kind kind);

/* ---- user objects (userobj.c) ------------------------------------------------------------ */

/* Releases every user-object reference that a graph or executable graph holds; lock held. */
HIDDEN void userobj_owner_release(uint64_t owner);
/* Gives `to` references to what `from` holds; lock held. False if out of memory. */
HIDDEN bool userobj_owner_copy(uint64_t from, uint64_t to);
/* Hands every reference `from` holds to `to` (which holds none); lock held. */
HIDDEN void userobj_owner_move(uint64_t from, uint64_t to);
/* Runs the destructors that releases made due; lock not held. */
HIDDEN void userobj_after_unlock(void);
/* Runs one kernel node (module.c); lock held. */
HIDDEN CUresult kernel_run_node(const struct node *n);
/* A kernel node (module.c) from a node parameter structure's members, checked as
 * cuLaunchKernel checks a launch (every failure CUDA_ERROR_INVALID_VALUE, as the graph
 * functions document, but a context that is not usable); `ctx` is used only with `kern`. */
struct kernel_desc {
    CUfunction func;
    CUkernel kern;
    CUcontext ctx;
    unsigned int grid[3], block[3];
    unsigned int shmem;
    void **params, **extra;
};
HIDDEN CUresult kernel_node_make(const struct kernel_desc *d, struct node *n);
/* A copy node (copy.c) from a 3D descriptor in context c, checked as cuMemcpy3DAsync checks it. */
HIDDEN CUresult copy_node_make(const CUDA_MEMCPY3D *p, struct ctx *c, struct node *n);
/* copy.c's pieces that copybatch.c runs a batch with: a 1D copy as the 3D descriptor of one row
 * of n bytes, each side of memory type HOST, DEVICE or UNIFIED; a 3D descriptor as a transfer;
 * a transfer's rows checked (nothing copied); the copy node of a transfer in context c. */
HIDDEN CUDA_MEMCPY3D copy_linear(uint64_t dst, CUmemorytype dtype, uint64_t src,
                                 CUmemorytype stype, size_t n);
HIDDEN CUresult copy_from_3d(const CUDA_MEMCPY3D *p, struct xfer *x);
/* An array side of a copy of x's shape (width in bytes) from byte x, row y, slice z of arr: its
 * first byte and mode, and the array's own pitch and rows per slice in *pitch and *rows (a
 * descriptor's are ignored for arrays). The copy must lie inside the array and start on an
 * element; CUDA_ERROR_INVALID_HANDLE for no live array. */
HIDDEN CUresult array_side(CUarray arr, size_t x, size_t y, size_t z, const struct xfer *shape,
                           bool write, size_t *pitch, size_t *rows, uint64_t *addr,
                           enum xmode *mode);
HIDDEN CUresult xfer_check(const struct xfer *x);
HIDDEN struct node copy_node_of(const struct xfer *x, const CUDA_MEMCPY3D *d, struct ctx *c);
/* Kernel nodes' kernelParams (graphstore.c): an array of one pointer per parameter, each to that
 * parameter's value, in storage owned by node h (n is the node it names). */
HIDDEN void **graph_node_kernel_params(CUgraphNode h, const struct node *n);
/* graphparams.c: a memset node from its parameters in context c; kernel nodes from either
 * ABI's structure; the kernel, memcpy or memset node a generic structure describes (other
 * types: CUDA_ERROR_NOT_SUPPORTED). */
HIDDEN CUresult memset_node_make(const CUDA_MEMSET_NODE_PARAMS *p, struct ctx *c, struct node *n);
HIDDEN CUresult kernel_node_v1(const CUDA_KERNEL_NODE_PARAMS_v1 *p, struct node *n);
HIDDEN CUresult kernel_node_v2(const CUDA_KERNEL_NODE_PARAMS_v2 *p, struct node *n);
HIDDEN CUresult node_from_params(const CUgraphNodeParams *p, struct node *out);
/* Node b's parameters into a, which keeps its identity: its handle, the child graph node it
 * came from and (in an executable graph) whether it is enabled. */
HIDDEN void node_take_params(struct node *a, const struct node *b);
/* cuGraphAddMemsetNode's work; cuGraphNodeSetParams' for kernel, memcpy and memset nodes (the
 * caller checked that the structure's type is the node's). */
HIDDEN CUresult graph_add_memset(CUgraphNode *out, CUgraph h, const CUgraphNode *deps,
                                 size_t ndeps, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx);
HIDDEN CUresult graph_node_set_params(CUgraphNode h, const CUgraphNodeParams *p);

/* ---- modules, VMM, IPC, arrays ----------------------------------------------------------- */

HIDDEN void module_ctx_teardown(struct ctx *c);
HIDDEN void ipc_ctx_teardown(struct ctx *c);
/* Marks the array or mipmapped array (with its levels) owning an AK_ARRAY block dead. */
HIDDEN void array_dead(void *owner);
/* The memory of live array h (a level of a mipmapped array included) as slices of rows: its
 * first byte, bytes per row (Width elements), rows per slice (Height, at least 1), slices
 * (Depth, at least 1) and bytes per element; CUDA_ERROR_INVALID_HANDLE for anything else. */
HIDDEN CUresult array_layout(CUarray h, uint64_t *base, size_t *row_bytes, size_t *rows,
                             size_t *slices, size_t *elem);
HIDDEN CUresult vmm_xlate(uint64_t addr, size_t n, bool write, char **host, size_t *contig);
HIDDEN CUresult ipc_xlate(uint64_t addr, size_t n, char **host, size_t *contig);
/* An imported pool pointer (cuMemPoolImportPointer): an alias of `target` like an IPC mapping,
 * reference-counted, made in context c. */
HIDDEN CUresult ipc_alias_pool(struct alloc *target, struct ctx *c, CUdeviceptr *out);
/* Frees one reference of the imported pool pointer, or the external buffer, at dptr; false if
 * there is none there. */
HIDDEN bool ipc_free_pool_alias(CUdeviceptr dptr);
/* Shareable handles (POSIX file descriptors): a memfd holding `n` bytes of payload, or -1;
 * and reading such a payload back from the descriptor a client passed (os_handle), checking
 * that it starts with the 8-byte `magic`. */
HIDDEN int share_fd_write(const char *name, const void *payload, size_t n);
HIDDEN bool share_fd_read(void *os_handle, void *payload, size_t n, const char magic[8]);
/* The IPC mapping or imported pool pointer containing addr: its base and size. */
HIDDEN bool ipc_address_range(uint64_t addr, uint64_t *base, uint64_t *size);

/* ---- teardown (context.c) ---------------------------------------------------------------- */

/* Frees everything a context owns: memory, streams, events, modules, IPC mappings. */
HIDDEN void ctx_teardown(struct ctx *c);

/* ---- resolver (resolver.c) --------------------------------------------------------------- */

HIDDEN bool resolver_exports(const char *symbol);

#endif /* SIMCUDA_INTERNAL_H */
