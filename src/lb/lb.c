/* lb.c — load balancing (filled in with the load-balancing work). */
#include "lb.h"

tess_status_t tess_lb_init(void) { return TESS_OK; }
void          tess_lb_fini(void) {}
