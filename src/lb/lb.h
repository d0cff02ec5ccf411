/*
 * lb.h — the lb component: load database, AtSync steps, strategies and migration orchestration.
 */
#ifndef TESS_LB_H
#define TESS_LB_H

#include "objects/objects.h"

tess_status_t tess_lb_init(void);
void          tess_lb_fini(void);

#endif /* TESS_LB_H */
