/*
 * table.c: handle tables and sorted range tables.
 *
 * A handle is an opaque value that encodes its kind and an index, far from any host or device
 * address: HANDLE_BASE + kind << 36 + (index + 1) << 4. Objects are never freed, so an index is
 * never reused and a destroyed handle stays recognisable forever.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define HANDLE_BASE 0x5ce000000000ull
#define KIND_SHIFT 36

struct objtab {
    void **v;
    size_t n;
    size_t cap;
};

static struct objtab objs[HK_COUNT];

bool sim_grow(void **v, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t cap2 = *cap ? *cap * 2 : 16;
    while (cap2 < need) cap2 *= 2;
    void *v2 = realloc(*v, cap2 * elem);
    if (!v2) return false;
    *v = v2;
    *cap = cap2;
    return true;
}

void *obj_new(enum hkind kind, size_t size) {
    struct objtab *t = &objs[kind];
    if (!sim_grow((void **)&t->v, &t->cap, t->n + 1, sizeof(void *))) return NULL;
    struct hdr *h = calloc(1, size);
    if (!h) return NULL;
    h->kind = kind;
    h->alive = true;
    h->handle = HANDLE_BASE + ((uint64_t)kind << KIND_SHIFT) + ((uint64_t)(t->n + 1) << 4);
    t->v[t->n++] = h;
    return h;
}

void *obj_get(enum hkind kind, uint64_t handle) {
    uint64_t base = HANDLE_BASE + ((uint64_t)kind << KIND_SHIFT);
    if (handle <= base || handle >= base + (1ull << KIND_SHIFT) || (handle & 0xf) != 0) return NULL;
    uint64_t index = ((handle - base) >> 4) - 1;
    struct objtab *t = &objs[kind];
    if (index >= t->n) return NULL;
    struct hdr *h = t->v[index];
    return h->alive ? h : NULL;
}

size_t obj_count(enum hkind kind) { return objs[kind].n; }

void *obj_at(enum hkind kind, size_t index) { return objs[kind].v[index]; }

uint64_t round_up(uint64_t v, uint64_t align) { return (v + align - 1) / align * align; }

/* Index of the first range whose start is > addr. */
static size_t upper(const struct rtab *t, uint64_t addr) {
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->v[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

struct range *rtab_find(const struct rtab *t, uint64_t addr) {
    size_t i = upper(t, addr);
    if (i == 0) return NULL;
    struct range *r = &t->v[i - 1];
    return addr - r->addr < r->size ? r : NULL;
}

struct range *rtab_exact(const struct rtab *t, uint64_t addr) {
    struct range *r = rtab_find(t, addr);
    return r && r->addr == addr ? r : NULL;
}

bool rtab_overlaps(const struct rtab *t, uint64_t addr, uint64_t size) {
    size_t i = upper(t, addr);
    if (i > 0 && t->v[i - 1].addr + t->v[i - 1].size > addr) return true;
    return i < t->n && t->v[i].addr < addr + size;
}

bool rtab_insert(struct rtab *t, uint64_t addr, uint64_t size, void *obj) {
    if (size == 0 || rtab_overlaps(t, addr, size)) return false;
    if (!sim_grow((void **)&t->v, &t->cap, t->n + 1, sizeof(struct range))) return false;
    size_t i = upper(t, addr);
    memmove(&t->v[i + 1], &t->v[i], (t->n - i) * sizeof(struct range));
    t->v[i] = (struct range){addr, size, obj};
    t->n++;
    return true;
}

bool rtab_remove(struct rtab *t, uint64_t addr) {
    struct range *r = rtab_exact(t, addr);
    if (!r) return false;
    size_t i = (size_t)(r - t->v);
    memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof(struct range));
    t->n--;
    return true;
}

bool rtab_first_fit(const struct rtab *t, uint64_t lo, uint64_t hi, uint64_t size,
                    uint64_t align, uint64_t *out) {
    uint64_t cur = round_up(lo, align);
    for (size_t i = 0; i <= t->n; i++) {
        uint64_t gap_end = i < t->n ? t->v[i].addr : hi;
        if (gap_end > hi) gap_end = hi;
        if (cur <= gap_end && gap_end - cur >= size) {
            *out = cur;
            return true;
        }
        if (i < t->n) {
            uint64_t next = round_up(t->v[i].addr + t->v[i].size, align);
            if (next > cur) cur = next;
        }
        if (cur >= hi) break;
    }
    return false;
}
