/* test_util: the util layer on its own — the MPSC queue (one thread, then 4 producers and a
 * consumer), the single-thread FIFO, the hash map against a reference (backward-shift deletion
 * around the wrap-around, growth, iteration), the pointer vector, option-value parsing, log
 * level names and status strings. No MPI. */
#include "util/util.h"
#include "tess_test.h"

#include <pthread.h>
#include <sched.h>

/* ---- MPSC queue -------------------------------------------------------------------------- */

typedef struct qitem {
    tess_qnode_t node;
    int          producer;
    int          seq;
    int          popped;
} qitem_t;

static qitem_t *qitem_of(tess_qnode_t *n)
{
    return (qitem_t *)((char *)n - offsetof(qitem_t, node));
}

static void test_mpsc_single(void)
{
    enum { N = 1000 };
    static qitem_t items[N];
    tess_mpsc_t    q;
    tess_mpsc_init(&q);
    CHECK(tess_mpsc_empty(&q));
    CHECK(tess_mpsc_pop(&q) == NULL);

    /* One at a time: the queue passes through its stub node every time. */
    for (int round = 0; round < 3; round++) {
        tess_mpsc_push(&q, &items[round].node);
        CHECK(!tess_mpsc_empty(&q));
        CHECK(tess_mpsc_pop(&q) == &items[round].node);
        CHECK(tess_mpsc_empty(&q));
        CHECK(tess_mpsc_pop(&q) == NULL);
    }

    /* Many, then all out in order. */
    for (int i = 0; i < N; i++)
        tess_mpsc_push(&q, &items[i].node);
    for (int i = 0; i < N; i++) {
        CHECK(!tess_mpsc_empty(&q));
        tess_qnode_t *n = tess_mpsc_pop(&q);
        CHECK_MSG(n == &items[i].node, "pop %d returned item %ld", i,
                  n ? (long)(qitem_of(n) - items) : -1L);
    }
    CHECK(tess_mpsc_empty(&q));
    CHECK(tess_mpsc_pop(&q) == NULL);

    /* Interleaved: push two, pop one, … keeps FIFO order. */
    int next_push = 0, next_pop = 0;
    while (next_pop < N) {
        for (int k = 0; k < 2 && next_push < N; k++)
            tess_mpsc_push(&q, &items[next_push++].node);
        tess_qnode_t *n = tess_mpsc_pop(&q);
        CHECK(n == &items[next_pop].node);
        next_pop++;
    }
    CHECK(tess_mpsc_empty(&q));
    CHECK(tess_mpsc_pop(&q) == NULL);
}

enum { NPROD = 4 };

typedef struct prod_arg {
    tess_mpsc_t *q;
    qitem_t     *items;
    int          n;
    _Atomic int *go;
} prod_arg_t;

static void *producer(void *arg)
{
    prod_arg_t *a = arg;
    while (!atomic_load(a->go))
        sched_yield();
    for (int i = 0; i < a->n; i++) {
        tess_mpsc_push(a->q, &a->items[i].node);
        if ((i & 1023) == 0)
            sched_yield(); /* let other producers interleave on a small machine */
    }
    return NULL;
}

static void test_mpsc_threads(void)
{
    const int   per = (int)test_scaled(100000, 2000);
    tess_mpsc_t q;
    tess_mpsc_init(&q);
    qitem_t   *items[NPROD];
    prod_arg_t args[NPROD];
    pthread_t  th[NPROD];
    _Atomic int go = 0;
    for (int p = 0; p < NPROD; p++) {
        items[p] = calloc((size_t)per, sizeof(qitem_t));
        CHECK(items[p]);
        for (int i = 0; i < per; i++) {
            items[p][i].producer = p;
            items[p][i].seq      = i;
        }
        args[p] = (prod_arg_t){&q, items[p], per, &go};
        CHECK(pthread_create(&th[p], NULL, producer, &args[p]) == 0);
    }
    atomic_store(&go, 1);
    int  next[NPROD] = {0};
    long total = 0, nulls = 0;
    while (total < (long)per * NPROD) {
        tess_qnode_t *n = tess_mpsc_pop(&q);
        if (!n) {
            nulls++;
            tess_cpu_relax();
            continue;
        }
        qitem_t *it = qitem_of(n);
        CHECK(it->producer >= 0 && it->producer < NPROD);
        CHECK(it >= items[it->producer] && it < items[it->producer] + per);
        CHECK_MSG(!it->popped, "item %d of producer %d popped twice", it->seq, it->producer);
        it->popped = 1;
        CHECK_MSG(it->seq == next[it->producer], "producer %d: got seq %d, expected %d",
                  it->producer, it->seq, next[it->producer]);
        next[it->producer]++;
        total++;
    }
    for (int p = 0; p < NPROD; p++)
        CHECK(pthread_join(th[p], NULL) == 0);
    CHECK(tess_mpsc_empty(&q));
    CHECK(tess_mpsc_pop(&q) == NULL);
    for (int p = 0; p < NPROD; p++) {
        CHECK(next[p] == per);
        for (int i = 0; i < per; i++)
            CHECK(items[p][i].popped);
        free(items[p]);
    }
    printf("mpsc: %d producers x %d pushes, %ld empty pops: ok\n", NPROD, per, nulls);
}

/* ---- FIFO -------------------------------------------------------------------------------- */

static void test_fifo(void)
{
    enum { N = 100 };
    static qitem_t items[N];
    tess_fifo_t    f = {NULL, NULL};
    CHECK(tess_fifo_pop(&f) == NULL);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++)
            tess_fifo_push(&f, &items[i].node);
        for (int i = 0; i < N; i++)
            CHECK(tess_fifo_pop(&f) == &items[i].node);
        CHECK(tess_fifo_pop(&f) == NULL);
        CHECK(f.head == NULL && f.tail == NULL);
    }
    /* Push after draining to one element, interleaved. */
    tess_fifo_push(&f, &items[0].node);
    tess_fifo_push(&f, &items[1].node);
    CHECK(tess_fifo_pop(&f) == &items[0].node);
    tess_fifo_push(&f, &items[2].node);
    CHECK(tess_fifo_pop(&f) == &items[1].node);
    CHECK(tess_fifo_pop(&f) == &items[2].node);
    CHECK(tess_fifo_pop(&f) == NULL);
    tess_fifo_push(&f, &items[3].node);
    CHECK(tess_fifo_pop(&f) == &items[3].node);
    CHECK(tess_fifo_pop(&f) == NULL);
}

/* ---- hash map ---------------------------------------------------------------------------- */

/* Linear probing stays correct only if no key has an empty slot between its home and its
 * slot: check that for every stored key, and that count matches. */
static void hmap_check_invariant(const tess_hmap_t *m)
{
    size_t mask = m->cap - 1, used = 0;
    CHECK(m->cap >= 16 && (m->cap & mask) == 0);
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] == TESS_HMAP_EMPTY)
            continue;
        used++;
        for (size_t j = tess_hash64(m->keys[i]) & mask; j != i; j = (j + 1) & mask)
            CHECK_MSG(m->keys[j] != TESS_HMAP_EMPTY, "key %llx at slot %zu is cut off from "
                      "its home %zu by an empty slot %zu", (unsigned long long)m->keys[i], i,
                      (size_t)(tess_hash64(m->keys[i]) & mask), j);
    }
    CHECK(used == m->count);
    CHECK(m->count * 2 <= m->cap);
}

static void *val_of(uint64_t key, unsigned gen)
{
    return (void *)(uintptr_t)(((key * 2654435761u) << 8 | (gen & 0xff)) | 1);
}

/* Keys whose home slot in a table of `cap` slots is `home`. */
static uint64_t key_with_home(size_t cap, size_t home, uint64_t *from)
{
    for (uint64_t k = *from;; k++) {
        if ((tess_hash64(k) & (cap - 1)) == home) {
            *from = k + 1;
            return k;
        }
    }
}

static void test_hmap_wrap(void)
{
    tess_hmap_t m;
    CHECK_OK(tess_hmap_init(&m, 0));
    CHECK(m.cap == 16);
    /* Three keys at home 15 and two at home 0: the run 15,0,1,2,3,4 crosses the end. */
    uint64_t from = 1, k15[3], k0[2], k14;
    for (int i = 0; i < 3; i++)
        k15[i] = key_with_home(16, 15, &from);
    from = 1;
    for (int i = 0; i < 2; i++)
        k0[i] = key_with_home(16, 0, &from);
    from = 1;
    k14 = key_with_home(16, 14, &from);
    uint64_t all[6] = {k15[0], k15[1], k15[2], k0[0], k0[1], k14};
    for (int i = 0; i < 6; i++) {
        CHECK_OK(tess_hmap_put(&m, all[i], val_of(all[i], 0)));
        hmap_check_invariant(&m);
    }
    CHECK(m.cap == 16 && m.count == 6);
    CHECK(m.keys[15] == k15[0] && m.keys[0] == k15[1] && m.keys[1] == k15[2]);
    CHECK(m.keys[2] == k0[0] && m.keys[3] == k0[1] && m.keys[14] == k14);

    /* Remove the first key of the run: everything behind it must shift back across the wrap. */
    CHECK(tess_hmap_remove(&m, k15[0]) == val_of(k15[0], 0));
    hmap_check_invariant(&m);
    CHECK(tess_hmap_get(&m, k15[0]) == NULL);
    for (int i = 1; i < 6; i++)
        CHECK_MSG(tess_hmap_get(&m, all[i]) == val_of(all[i], 0), "key %d lost", i);
    CHECK(m.keys[15] == k15[1] && m.keys[0] == k15[2]);
    /* k0 keys are at home 0 and must not move before it (to slot 15). */
    CHECK(m.keys[1] == k0[0] && m.keys[2] == k0[1] && m.keys[3] == TESS_HMAP_EMPTY);

    /* Remove a key at slot 0 (home 15): k0[0] moves into slot 0 — its home. */
    CHECK(tess_hmap_remove(&m, k15[2]) == val_of(k15[2], 0));
    hmap_check_invariant(&m);
    CHECK(m.keys[0] == k0[0] && m.keys[1] == k0[1]);
    for (int i = 0; i < 6; i++) {
        void *want = (all[i] == k15[0] || all[i] == k15[2]) ? NULL : val_of(all[i], 0);
        CHECK(tess_hmap_get(&m, all[i]) == want);
    }
    /* Remove the one at home 14: nothing after it belongs to an earlier home. */
    CHECK(tess_hmap_remove(&m, k14) == val_of(k14, 0));
    hmap_check_invariant(&m);
    CHECK(tess_hmap_remove(&m, k14) == NULL);
    CHECK(tess_hmap_get(&m, k15[1]) == val_of(k15[1], 0));
    CHECK(tess_hmap_remove(&m, k15[1]) && tess_hmap_remove(&m, k0[0]) &&
          tess_hmap_remove(&m, k0[1]));
    CHECK(m.count == 0);
    for (size_t i = 0; i < m.cap; i++)
        CHECK(m.keys[i] == TESS_HMAP_EMPTY); /* no tombstones */
    tess_hmap_fini(&m);
}

static void test_hmap_random(void)
{
    enum { DOMAIN = 3000 };
    const int ops = (int)test_scaled(200000, 20000);
    uint64_t  keys[DOMAIN];
    void     *ref[DOMAIN];
    unsigned  gen[DOMAIN];
    uint64_t  rng = 12345;
    for (int i = 0; i < DOMAIN; i++) {
        /* Mix small keys (adjacent, colliding runs) with large and edge ones. */
        keys[i] = i < 1000 ? (uint64_t)i : i < 2990 ? test_rand(&rng) : UINT64_MAX - 1 - (i - 2990);
        ref[i]  = NULL;
        gen[i]  = 0;
    }
    keys[1500] = 0; /* 0 is a valid key */
    keys[0]    = 1u << 20;
    tess_hmap_t m;
    CHECK_OK(tess_hmap_init(&m, 4));
    size_t count = 0, max_cap = 0;
    for (int op = 0; op < ops; op++) {
        uint64_t r = test_rand(&rng);
        int      i = (int)(r % DOMAIN);
        /* Phases of mostly inserts and mostly removes, so the table grows and empties. */
        int      insert_bias = ((op / 20000) & 1) ? 30 : 70;
        if ((int)((r >> 32) % 100) < insert_bias) {
            gen[i]++;
            void *v = val_of(keys[i], gen[i]);
            CHECK_OK(tess_hmap_put(&m, keys[i], v));
            if (!ref[i])
                count++;
            ref[i] = v;
        } else {
            void *got = tess_hmap_remove(&m, keys[i]);
            CHECK_MSG(got == ref[i], "remove of key %llx returned %p, expected %p",
                      (unsigned long long)keys[i], got, ref[i]);
            if (ref[i])
                count--;
            ref[i] = NULL;
        }
        CHECK(m.count == count);
        if (m.cap > max_cap)
            max_cap = m.cap;
        int j = (int)(test_rand(&rng) % DOMAIN);
        CHECK(tess_hmap_get(&m, keys[j]) == ref[j]);
        if (op % 997 == 0) {
            hmap_check_invariant(&m);
            for (int k = 0; k < DOMAIN; k++)
                CHECK(tess_hmap_get(&m, keys[k]) == ref[k]);
        }
    }
    hmap_check_invariant(&m);
    CHECK(max_cap >= 2048); /* it grew from 16 */
    /* Iteration visits every stored key exactly once, with its value. */
    size_t   seen = 0, it = 0;
    uint64_t k;
    void    *v;
    int     *visited = calloc(DOMAIN, sizeof(int));
    CHECK(visited);
    while (tess_hmap_next(&m, &it, &k, &v)) {
        int found = -1;
        for (int i = 0; i < DOMAIN; i++)
            if (keys[i] == k)
                found = i;
        CHECK(found >= 0 && ref[found] == v && !visited[found]);
        visited[found] = 1;
        seen++;
    }
    CHECK(seen == count);
    CHECK(!tess_hmap_next(&m, &it, &k, &v)); /* stays at the end */
    free(visited);
    tess_hmap_fini(&m);
    CHECK(m.keys == NULL && m.count == 0);
}

static void test_hmap_basic(void)
{
    tess_hmap_t m;
    CHECK_OK(tess_hmap_init(&m, 1000));
    CHECK(m.cap >= 2000);
    size_t it = 0;
    CHECK(!tess_hmap_next(&m, &it, NULL, NULL));
    CHECK(tess_hmap_get(&m, 42) == NULL);
    CHECK(tess_hmap_remove(&m, 42) == NULL);
    CHECK(tess_hmap_put(&m, TESS_HMAP_EMPTY, (void *)1) == TESS_ERR_INVALID);
    CHECK(m.count == 0);
    CHECK_OK(tess_hmap_put(&m, 42, (void *)1));
    CHECK_OK(tess_hmap_put(&m, 42, (void *)2)); /* replace */
    CHECK(m.count == 1 && tess_hmap_get(&m, 42) == (void *)2);
    tess_hmap_fini(&m);

    /* Growth from the smallest table keeps every key; the table stays at most half full. */
    const int n = (int)test_scaled(50000, 5000);
    CHECK_OK(tess_hmap_init(&m, 0));
    for (int i = 0; i < n; i++) {
        uint64_t key = (uint64_t)i * 7919u;
        CHECK_OK(tess_hmap_put(&m, key, val_of(key, 1)));
        CHECK(m.count == (size_t)i + 1 && m.count * 2 <= m.cap);
    }
    hmap_check_invariant(&m);
    for (int i = 0; i < n; i++) {
        uint64_t key = (uint64_t)i * 7919u;
        CHECK(tess_hmap_get(&m, key) == val_of(key, 1));
        CHECK(tess_hmap_get(&m, key + 1) == NULL);
    }
    size_t seen = 0;
    it          = 0;
    while (tess_hmap_next(&m, &it, NULL, NULL))
        seen++;
    CHECK(seen == (size_t)n);
    for (int i = 0; i < n; i += 2)
        CHECK(tess_hmap_remove(&m, (uint64_t)i * 7919u) != NULL);
    hmap_check_invariant(&m);
    for (int i = 0; i < n; i++)
        CHECK(tess_hmap_get(&m, (uint64_t)i * 7919u) == (i % 2 ? val_of((uint64_t)i * 7919u, 1)
                                                                : NULL));
    tess_hmap_fini(&m);
}

/* ---- vector ------------------------------------------------------------------------------ */

static void test_vec(void)
{
    tess_vec_t v = {0};
    static int x[1000];
    for (int i = 0; i < 1000; i++)
        CHECK_OK(tess_vec_push(&v, &x[i]));
    CHECK(v.count == 1000 && v.cap >= 1000);
    for (int i = 0; i < 1000; i++)
        CHECK(v.items[i] == &x[i]);
    tess_vec_swap_remove(&v, 10); /* the last moves into 10 */
    CHECK(v.count == 999 && v.items[10] == &x[999] && v.items[11] == &x[11]);
    tess_vec_swap_remove(&v, v.count - 1); /* removing the last keeps the rest */
    CHECK(v.count == 998 && v.items[997] == &x[997] && v.items[10] == &x[999]);
    while (v.count)
        tess_vec_swap_remove(&v, 0);
    CHECK_OK(tess_vec_push(&v, &x[5]));
    CHECK(v.count == 1 && v.items[0] == &x[5]);
    tess_vec_fini(&v);
    CHECK(v.items == NULL && v.count == 0 && v.cap == 0);
    tess_vec_fini(&v); /* twice is harmless */
}

/* ---- parsing ----------------------------------------------------------------------------- */

static void test_parse(void)
{
    static const struct { const char *s; size_t v; } sizes[] = {
        {"0", 0}, {"1", 1}, {"123", 123}, {"4k", 4096}, {"4K", 4096}, {"4kb", 4096},
        {"4KB", 4096}, {"2m", 2u << 20}, {"3M", 3u << 20}, {"1g", 1u << 30}, {"5G", 5ull << 30},
        {"10b", 10}, {"18446744073709551615", SIZE_MAX}, {"16777215g", 16777215ull << 30},
    };
    for (size_t i = 0; i < TESS_ARRAY_LEN(sizes); i++) {
        size_t v = 7;
        CHECK_MSG(tess_parse_size(sizes[i].s, &v) == TESS_OK && v == sizes[i].v,
                  "parse_size('%s') gave %zu", sizes[i].s, v);
    }
    static const char *const bad_sizes[] = {"", "k", "abc", "4x", "4kk", "4k ", "4 k", "1.5m",
                                            "-1", "-4k", "18446744073709551616",
                                            "17179869184g", "99999999999999999999k", "0x10"};
    for (size_t i = 0; i < TESS_ARRAY_LEN(bad_sizes); i++) {
        size_t v = 7;
        CHECK_MSG(tess_parse_size(bad_sizes[i], &v) == TESS_ERR_INVALID && v == 7,
                  "parse_size('%s') accepted, gave %zu", bad_sizes[i], v);
    }

    long v;
    CHECK(tess_parse_int("42", 0, 100, &v) == TESS_OK && v == 42);
    CHECK(tess_parse_int("0", 0, 100, &v) == TESS_OK && v == 0);
    CHECK(tess_parse_int("100", 0, 100, &v) == TESS_OK && v == 100);
    CHECK(tess_parse_int("-5", -10, 10, &v) == TESS_OK && v == -5);
    CHECK(tess_parse_int("+7", 0, 10, &v) == TESS_OK && v == 7);
    v = 99;
    static const char *const bad_ints[] = {"", "abc", "101", "-1", "1.5", "12abc", "4k", " ",
                                           "99999999999999999999", "0x10"};
    for (size_t i = 0; i < TESS_ARRAY_LEN(bad_ints); i++)
        CHECK_MSG(tess_parse_int(bad_ints[i], 0, 100, &v) == TESS_ERR_INVALID && v == 99,
                  "parse_int('%s') accepted", bad_ints[i]);

    static const struct { const char *s; int v; } bools[] = {
        {"1", 1}, {"0", 0}, {"yes", 1}, {"no", 0}, {"true", 1}, {"false", 0}, {"on", 1},
        {"off", 0}, {"y", 1}, {"n", 0}, {"YES", 1}, {"False", 0}, {"ON", 1},
    };
    for (size_t i = 0; i < TESS_ARRAY_LEN(bools); i++) {
        int b = 7;
        CHECK_MSG(tess_parse_bool(bools[i].s, &b) == TESS_OK && b == bools[i].v,
                  "parse_bool('%s') gave %d", bools[i].s, b);
    }
    static const char *const bad_bools[] = {"", "2", "maybe", "yess", "of", "-1", "t r u e"};
    for (size_t i = 0; i < TESS_ARRAY_LEN(bad_bools); i++) {
        int b = 7;
        CHECK_MSG(tess_parse_bool(bad_bools[i], &b) == TESS_ERR_INVALID && b == 7,
                  "parse_bool('%s') accepted", bad_bools[i]);
    }
}

static void test_log_levels(void)
{
    static const char *const names[] = {"error", "warn", "info", "debug", "trace"};
    CHECK(TESS_LOG_ERROR == 0 && TESS_LOG_TRACE == 4);
    for (int i = 0; i < 5; i++) {
        char upper[16], digit[2] = {(char)('0' + i), 0};
        for (size_t k = 0; k <= strlen(names[i]); k++)
            upper[k] = (char)(names[i][k] >= 'a' ? names[i][k] - 32 : names[i][k]);
        CHECK(tess_log_level_parse(names[i]) == i);
        CHECK(tess_log_level_parse(upper) == i);
        CHECK(tess_log_level_parse(digit) == i);
    }
    static const char *const bad[] = {"", "5", "9", "-1", "01", "warning", "err", "debug ", "x"};
    for (size_t i = 0; i < TESS_ARRAY_LEN(bad); i++)
        CHECK_MSG(tess_log_level_parse(bad[i]) == -1, "level '%s' accepted", bad[i]);
    CHECK(tess_log_level_parse(NULL) == -1);
}

static void test_status(void)
{
    const char *seen[32];
    int         n = 0;
    for (int s = TESS_ERR_BUSY; s <= TESS_INPROGRESS; s++) {
        const char *t = tess_status_string((tess_status_t)s);
        CHECK(t && *t);
        CHECK_MSG(strcmp(t, "unknown status") != 0, "status %d has no text", s);
        for (int k = 0; k < n; k++)
            CHECK_MSG(strcmp(seen[k], t) != 0, "status %d repeats '%s'", s, t);
        seen[n++] = t;
    }
    CHECK(n == 15);
    const char *u = tess_status_string((tess_status_t)-99);
    CHECK(u && *u);
    for (int k = 0; k < n; k++)
        CHECK(strcmp(seen[k], u) != 0);
    CHECK(tess_status_string((tess_status_t)2) && *tess_status_string((tess_status_t)2));

    /* The detail of the last error, per thread. */
    CHECK(tess_error(TESS_ERR_NOT_FOUND, "widget %d is missing", 17) == TESS_ERR_NOT_FOUND);
    CHECK(strstr(tess_error_detail(), "widget 17 is missing") != NULL);
    CHECK(strstr(tess_error_detail(), tess_status_string(TESS_ERR_NOT_FOUND)) != NULL);
}

static void *detail_thread(void *arg)
{
    (void)arg;
    /* A new thread has no error yet, and its error does not leak into other threads. */
    CHECK(strcmp(tess_error_detail(), "") == 0);
    tess_error(TESS_ERR_BUSY, "thread error");
    CHECK(strstr(tess_error_detail(), "thread error") != NULL);
    return NULL;
}

static void test_detail_per_thread(void)
{
    tess_error(TESS_ERR_INVALID, "main error");
    pthread_t t;
    CHECK(pthread_create(&t, NULL, detail_thread, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(strstr(tess_error_detail(), "main error") != NULL);
}

int main(void)
{
    test_mpsc_single();
    test_mpsc_threads();
    test_fifo();
    test_hmap_basic();
    test_hmap_wrap();
    test_hmap_random();
    test_vec();
    test_parse();
    test_log_levels();
    test_status();
    test_detail_per_thread();
    printf("util: ok\n");
    return 0;
}
