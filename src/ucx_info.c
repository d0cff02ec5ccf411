/* ucx_info.c — for tessera-info: which UCX this binary runs with (version, library path) and
 * which of its transports can reach device memory, asked of UCT at run time (so it reports the
 * library actually loaded, e.g. a carried build through LD_LIBRARY_PATH, not the one configured).
 *
 * For each memory domain: its transports, and the memory types it can access directly
 * (access: cuda_copy, cuda_ipc, gdr_copy) or register for a NIC (register: rc/dc with
 * GPUDirect RDMA). Single-threaded (the tool's main thread). */
#define _GNU_SOURCE
#include "ucx_info.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

static void print_types(FILE *f, const char *what, uint64_t types)
{
    static const struct {
        ucs_memory_type_t t;
        const char       *name;
    } names[] = {{UCS_MEMORY_TYPE_HOST, "host"}, {UCS_MEMORY_TYPE_CUDA, "cuda"},
                 {UCS_MEMORY_TYPE_CUDA_MANAGED, "cuda-managed"}, {UCS_MEMORY_TYPE_ROCM, "rocm"},
                 {UCS_MEMORY_TYPE_ROCM_MANAGED, "rocm-managed"}};
    int any = 0;
    fprintf(f, " %s=", what);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (types & UCS_BIT(names[i].t)) {
            fprintf(f, "%s%s", any ? "," : "", names[i].name);
            any = 1;
        }
    if (!any)
        fprintf(f, "-");
}

static int device_type(uint64_t types)
{
    return (types & (UCS_BIT(UCS_MEMORY_TYPE_CUDA) | UCS_BIT(UCS_MEMORY_TYPE_ROCM))) != 0;
}

void tess_print_ucx_info(FILE *f)
{
    unsigned major, minor, release;
    ucp_get_version(&major, &minor, &release);
    Dl_info dl = {0};
    dladdr((void *)ucp_get_version, &dl);
    fprintf(f, "UCX: %u.%u.%u (%s; built against %d.%d)\n", major, minor, release,
            dl.dli_fname ? dl.dli_fname : "?", UCP_API_MAJOR, UCP_API_MINOR);

    uct_component_h *comps;
    unsigned         ncomps;
    if (uct_query_components(&comps, &ncomps) != UCS_OK) {
        fprintf(f, "UCX transports: cannot list UCT components\n");
        return;
    }
    char dev_tls[512] = "";
    fprintf(f, "UCX memory domains (transports; memory types accessed or registered):\n");
    for (unsigned c = 0; c < ncomps; c++) {
        uct_md_resource_desc_t mds[32];
        uct_component_attr_t   ca = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME |
                                                   UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT};
        if (uct_component_query(comps[c], &ca) != UCS_OK)
            continue;
        if (ca.md_resource_count > 32)
            ca.md_resource_count = 32;
        ca.field_mask        = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        ca.md_resources      = mds;
        if (uct_component_query(comps[c], &ca) != UCS_OK)
            continue;
        for (unsigned m = 0; m < ca.md_resource_count; m++) {
            uct_md_config_t *cfg;
            uct_md_h         md;
            if (uct_md_config_read(comps[c], NULL, NULL, &cfg) != UCS_OK)
                continue;
            ucs_status_t us = uct_md_open(comps[c], mds[m].md_name, cfg, &md);
            uct_config_release(cfg);
            if (us != UCS_OK)
                continue;
            uct_md_attr_t          attr;
            uct_tl_resource_desc_t *tls;
            unsigned                ntls;
            if (uct_md_query(md, &attr) == UCS_OK &&
                uct_md_query_tl_resources(md, &tls, &ntls) == UCS_OK) {
                fprintf(f, "  md %-12s tl:", mds[m].md_name);
                char last[UCT_TL_NAME_MAX] = "";
                for (unsigned t = 0; t < ntls; t++)
                    if (strcmp(last, tls[t].tl_name)) {
                        fprintf(f, " %s", tls[t].tl_name);
                        snprintf(last, sizeof(last), "%s", tls[t].tl_name);
                        if (device_type(attr.cap.access_mem_types | attr.cap.reg_mem_types) &&
                            !strstr(dev_tls, tls[t].tl_name) &&
                            strlen(dev_tls) + strlen(tls[t].tl_name) + 2 < sizeof(dev_tls)) {
                            strcat(dev_tls, " ");
                            strcat(dev_tls, tls[t].tl_name);
                        }
                    }
                print_types(f, "access", attr.cap.access_mem_types);
                print_types(f, "register", attr.cap.reg_mem_types);
                fprintf(f, "\n");
                uct_release_tl_resource_list(tls);
            }
            uct_md_close(md);
        }
    }
    uct_release_component_list(comps);
    fprintf(f, "UCX transports for device memory:%s\n", dev_tls[0] ? dev_tls : " none");
}
