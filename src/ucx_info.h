/* ucx_info.h — tessera-info's UCX report (src/ucx_info.c). Main thread of the tool only. */
#ifndef TESS_UCX_INFO_H
#define TESS_UCX_INFO_H

#include <stdio.h>

/* Prints the UCX version and library path in use, its memory domains with their transports and
 * memory types, and the transports that can reach device memory. */
void tess_print_ucx_info(FILE *f);

#endif
