/*
 * userobj.c: user objects (CUDA 11.3), reference-counted objects whose destructor runs when
 * the last reference goes. References are held by the calling program (cuUserObjectCreate,
 * Retain, Release) or by graphs (cuGraphRetainUserObject, cuGraphReleaseUserObject); a graph
 * releases its references when it is destroyed, and instantiation gives the executable graph
 * references of its own to everything the graph and its child graphs hold, released when the
 * executable graph is destroyed (the programming guide's "CUDA User Objects"). A whole-graph
 * update (cuGraphExecUpdate) replaces the executable graph's references with copies of the new
 * source graph's; cuGraphExecChildGraphNodeSetParams adds the new child graph's.
 *
 * Destructors may not call the driver. The real driver runs them on an internal thread; here
 * they run on the calling thread before the call that dropped the last reference returns,
 * outside the driver lock.
 */
#include <stdlib.h>

#include "internal.h"

struct user_object {
    struct hdr h;
    long long refs; /* every reference, the program's and the graphs' */
    CUhostFn destroy;
    void *ptr;
};

/* References held by a graph or an executable graph (its handle). */
struct held {
    uint64_t owner;
    struct user_object *obj;
    long long count;
};

static struct held *g_held;
static size_t g_nheld, g_capheld;

/* Destructors due, run by userobj_after_unlock once the lock is released. */
static struct user_object **g_due;
static size_t g_ndue, g_capdue;

/* Drops `count` references; a destructor due is queued. Lock held. */
static void drop(struct user_object *o, long long count) {
    o->refs -= count;
    if (o->refs > 0 || !o->h.alive) return;
    o->h.alive = false;
    if (o->destroy && sim_grow((void **)&g_due, &g_capdue, g_ndue + 1, sizeof *g_due))
        g_due[g_ndue++] = o;
}

void userobj_after_unlock(void) {
    for (;;) {
        sim_lock();
        struct user_object *o = g_ndue ? g_due[--g_ndue] : NULL;
        sim_unlock();
        if (!o) return;
        o->destroy(o->ptr);
    }
}

static struct held *held_of(uint64_t owner, const struct user_object *o) {
    for (size_t i = 0; i < g_nheld; i++)
        if (g_held[i].owner == owner && g_held[i].obj == o) return &g_held[i];
    return NULL;
}

static bool hold(uint64_t owner, struct user_object *o, long long count) {
    struct held *e = held_of(owner, o);
    if (e) {
        e->count += count;
        return true;
    }
    if (!sim_grow((void **)&g_held, &g_capheld, g_nheld + 1, sizeof *g_held)) return false;
    g_held[g_nheld++] = (struct held){owner, o, count};
    return true;
}

void userobj_owner_release(uint64_t owner) {
    for (size_t i = g_nheld; i-- > 0;) {
        if (g_held[i].owner != owner) continue;
        struct held e = g_held[i];
        g_held[i] = g_held[--g_nheld];
        drop(e.obj, e.count);
    }
}

bool userobj_owner_copy(uint64_t from, uint64_t to) {
    size_t n = g_nheld; /* hold() may append */
    for (size_t i = 0; i < n; i++) {
        if (g_held[i].owner != from) continue;
        struct user_object *o = g_held[i].obj;
        long long count = g_held[i].count;
        if (!hold(to, o, count)) return false;
        o->refs += count;
    }
    return true;
}

void userobj_owner_move(uint64_t from, uint64_t to) {
    for (size_t i = 0; i < g_nheld; i++)
        if (g_held[i].owner == from) g_held[i].owner = to;
}

static struct user_object *user_object(CUuserObject h) {
    return obj_get(HK_USER_OBJECT, (uint64_t)(uintptr_t)h);
}

static CUresult create(CUuserObject *out, void *ptr, CUhostFn destroy, unsigned int refs,
                       unsigned int flags) {
    if (!out || !destroy || refs == 0 || refs > INT32_MAX ||
        flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)
        return CUDA_ERROR_INVALID_VALUE;
    struct user_object *o = obj_new(HK_USER_OBJECT, sizeof *o);
    if (!o) return CUDA_ERROR_OUT_OF_MEMORY;
    o->refs = refs;
    o->destroy = destroy;
    o->ptr = ptr;
    *out = (CUuserObject)(uintptr_t)H(o);
    return CUDA_SUCCESS;
}

static CUresult retain(CUuserObject h, unsigned int count) {
    struct user_object *o = user_object(h);
    if (!o || count == 0 || count > INT32_MAX) return CUDA_ERROR_INVALID_VALUE;
    o->refs += count;
    return CUDA_SUCCESS;
}

/* The program's references are not counted apart from the graphs': releasing more than the
 * program holds is undefined behaviour in CUDA; here it drops the graphs' too. */
static CUresult release(CUuserObject h, unsigned int count) {
    struct user_object *o = user_object(h);
    if (!o || count == 0 || count > INT32_MAX) return CUDA_ERROR_INVALID_VALUE;
    drop(o, count);
    return CUDA_SUCCESS;
}

static CUresult graph_retain(CUgraph graph, CUuserObject h, unsigned int count,
                             unsigned int flags) {
    struct graph *g = graph_get(graph);
    struct user_object *o = user_object(h);
    if (!g || !o || count == 0 || count > INT32_MAX || (flags & ~CU_GRAPH_USER_OBJECT_MOVE))
        return CUDA_ERROR_INVALID_VALUE;
    if (!hold((uint64_t)(uintptr_t)graph, o, count)) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!(flags & CU_GRAPH_USER_OBJECT_MOVE)) o->refs += count;
    return CUDA_SUCCESS;
}

static CUresult graph_release(CUgraph graph, CUuserObject h, unsigned int count) {
    struct graph *g = graph_get(graph);
    struct user_object *o = user_object(h);
    if (!g || !o || count == 0 || count > INT32_MAX) return CUDA_ERROR_INVALID_VALUE;
    struct held *e = held_of((uint64_t)(uintptr_t)graph, o);
    if (!e || e->count < count) return CUDA_ERROR_INVALID_VALUE;
    e->count -= count;
    if (e->count == 0) *e = g_held[--g_nheld];
    drop(o, count);
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuUserObjectCreate(CUuserObject *object_out, void *ptr, CUhostFn destroy,
                                        unsigned int initialRefcount, unsigned int flags) {
    API_ENTER();
    API_LOCKED(create(object_out, ptr, destroy, initialRefcount, flags));
}

SIMCUDA_API CUresult cuUserObjectRetain(CUuserObject object, unsigned int count) {
    API_ENTER();
    API_LOCKED(retain(object, count));
}

SIMCUDA_API CUresult cuUserObjectRelease(CUuserObject object, unsigned int count) {
    API_ENTER();
    API_LOCKED_THEN_DESTRUCTORS(release(object, count));
}

SIMCUDA_API CUresult cuGraphRetainUserObject(CUgraph graph, CUuserObject object,
                                             unsigned int count, unsigned int flags) {
    API_ENTER();
    API_LOCKED(graph_retain(graph, object, count, flags));
}

SIMCUDA_API CUresult cuGraphReleaseUserObject(CUgraph graph, CUuserObject object,
                                              unsigned int count) {
    API_ENTER();
    API_LOCKED_THEN_DESTRUCTORS(graph_release(graph, object, count));
}
