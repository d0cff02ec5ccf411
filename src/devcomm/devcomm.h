/*
 * devcomm.h — the devcomm component: device messages over the three paths (a D2D copy within
 * a process, IPC between processes of a node, UCX RDMA get between nodes).
 */
#ifndef TESS_DEVCOMM_H
#define TESS_DEVCOMM_H

#include "core/core.h"

tess_status_t tess_devcomm_init(void);
void          tess_devcomm_fini(void);

#endif /* TESS_DEVCOMM_H */
