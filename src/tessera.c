/* tessera.c — the library glue above the layers: tess_init/tess_finalize bring the layers up
 * and down in order (core, devcomm, objects, lb), and the public phase and identity calls. */
#include "core/core.h"
#include "devcomm/devcomm.h"
#include "objects/objects.h"
#include "lb/lb.h"

tess_status_t tess_init(int *argc, char ***argv, MPI_Comm comm, const tess_params_t *params)
{
    tess_error_clear();
    tess_status_t st = tess_core_init(argc, argv, comm, params);
    if (st != TESS_OK)
        return st;
    if ((st = tess_devcomm_init()) != TESS_OK)
        goto err_core_fini;
    if ((st = tess_obj_init()) != TESS_OK)
        goto err_devcomm_fini;
    if ((st = tess_lb_init()) != TESS_OK)
        goto err_obj_fini;
    if ((st = tess_core_start()) != TESS_OK)
        goto err_lb_fini;
    return TESS_OK;

err_lb_fini:
    tess_lb_fini();
err_obj_fini:
    tess_obj_fini();
err_devcomm_fini:
    tess_devcomm_fini();
err_core_fini:
    tess_core_fini();
    return st;
}

tess_status_t tess_finalize(void)
{
    tess_error_clear();
    tess_status_t st = tess_obj_check_main("tess_finalize");
    if (st != TESS_OK)
        return st;
    tess_status_t ck = tess_obj_ckpt_fini(); /* collective: before the processes part */
    tess_core_collective_enter(TESS_COLL_FINALIZE);
    tess_lb_fini();
    tess_obj_fini();
    tess_obj_entries_fini();
    tess_devcomm_fini();
    st = tess_core_fini();
    return ck != TESS_OK ? ck : st;
}

int tess_initialized(void) { return tess_core_initialized(); }

tess_status_t tess_run(tess_run_mode_t mode, tess_start_fn_t start, void *arg)
{
    tess_error_clear();
    tess_dc_streams_dirty(); /* the caller may have enqueued work on element streams */
    tess_status_t st = tess_core_run(mode, start, arg);
    /* A tess_cb_checkpoint reduction ended the phase at quiescence: checkpoint, then go on. */
    while (st == TESS_OK && tess_obj_ckpt_cb_due()) {
        st = tess_obj_ckpt_cb_checkpoint();
        if (st != TESS_OK)
            break;
        tess_dc_streams_dirty();
        st = tess_core_run(mode, tess_obj_ckpt_cb_deliver, NULL);
    }
    return st;
}

tess_status_t tess_exit_loc(const void *data, size_t size, const char *file, int line)
{
    tess_error_clear();
    tess_obj_check_init("tess_exit", file, line);
    if (tess_unlikely(!tess_core_pe_self() || !tess_core_in_phase()))
        tess_obj_misuse(file, line, "tess_exit outside a phase");
    if (data)
        tess_obj_check_size(size, data, "tess_exit_with", file, line);
    return tess_core_exit(data, size);
}

tess_status_t tess_result(void *buf, size_t size, size_t *size_p)
{
    tess_error_clear();
    if (!buf && size)
        return tess_error(TESS_ERR_INVALID, "tess_result: buf is NULL but size is %zu", size);
    return tess_core_result(buf, size, size_p);
}

int tess_process(void) { return tess_core_initialized() ? tess_rt.rank : -1; }
int tess_num_processes(void) { return tess_core_initialized() ? tess_rt.size : 0; }
int tess_ppn(void) { return tess_core_initialized() ? tess_rt.ppn : 0; }
int tess_num_pes(void) { return tess_core_initialized() ? tess_core_num_pes() : 0; }
int tess_pe_process(int pe) { return tess_core_initialized() ? tess_core_pe_process(pe) : -1; }
double tess_wtime(void) { return (double)tess_time_ns() * 1e-9; }

int tess_pe(void) { return tess_core_pe_id(); }
