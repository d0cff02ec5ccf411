/* queue.c — the consumer side of the intrusive MPSC queue (Vyukov's algorithm). */
#include "util.h"

void tess_mpsc_init(tess_mpsc_t *q)
{
    atomic_store_explicit(&q->stub.next, NULL, memory_order_relaxed);
    atomic_store_explicit(&q->tail, &q->stub, memory_order_relaxed);
    q->head = &q->stub;
}

tess_qnode_t *tess_mpsc_pop(tess_mpsc_t *q)
{
    tess_qnode_t *head = q->head;
    tess_qnode_t *next = atomic_load_explicit(&head->next, memory_order_acquire);
    if (head == &q->stub) {
        if (!next)
            return NULL;
        q->head = next;
        head    = next;
        next    = atomic_load_explicit(&head->next, memory_order_acquire);
    }
    if (next) {
        q->head = next;
        return head;
    }
    if (head != atomic_load_explicit(&q->tail, memory_order_acquire))
        return NULL; /* a producer is between its exchange and its link */
    tess_mpsc_push(q, &q->stub);
    next = atomic_load_explicit(&head->next, memory_order_acquire);
    if (next) {
        q->head = next;
        return head;
    }
    return NULL;
}
