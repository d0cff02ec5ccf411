/* devcomm.c — device-message paths (filled in with the device-message work). */
#include "devcomm.h"

tess_status_t tess_devcomm_init(void) { return TESS_OK; }
void          tess_devcomm_fini(void) {}
