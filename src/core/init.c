/* init.c — tess_core_init/fini: MPI checks and communicators, job id, node and virtual-node
 * detection, the device backend, the network, the PEs; the abort path; the layer hooks. */
#include "core_int.h"
#include "core/trace.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

tess_runtime_t      tess_core;
tess_runtime_info_t tess_rt;

int tess_core_initialized(void)
{
    return tess_core.initialized;
}

int tess_core_on_main_thread(void)
{
    return tess_core.initialized && pthread_equal(pthread_self(), tess_core.main_thread);
}

/* A launcher that keeps the job when a process fails (Open MPI's --enable-recovery,
 * orte_enable_recovery) also ignores how its processes exit: mpirun ends with status 0 after
 * every process aborted. When this process aborts under such a launcher, it ends the launcher
 * (its parent: mpirun, or the node's daemon, whose loss ends the job) so that the run fails. */
static int core_launcher_recovers(void)
{
    static const char *const vars[] = {"OMPI_MCA_orte_enable_recovery",
                                       "OMPI_MCA_prte_enable_recovery",
                                       "PRTE_MCA_prte_enable_recovery"};
    for (size_t i = 0; i < TESS_ARRAY_LEN(vars); i++) {
        const char *v = getenv(vars[i]);
        int         on;
        if (v && tess_parse_bool(v, &on) == TESS_OK && on)
            return 1;
    }
    return 0;
}

static void core_abort_launcher(void)
{
    if (!core_launcher_recovers())
        return;
    pid_t parent = getppid();
    char  path[64], comm[64] = "";
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)parent);
    FILE *f = fopen(path, "r");
    if (f) {
        if (!fgets(comm, sizeof(comm), f))
            comm[0] = '\0';
        fclose(f);
    }
    comm[strcspn(comm, "\n")] = '\0';
    static const char *const launchers[] = {"mpirun", "mpiexec", "orterun", "orted", "prterun",
                                            "prted"};
    for (size_t i = 0; i < TESS_ARRAY_LEN(launchers); i++)
        if (!strncmp(comm, launchers[i], strlen(launchers[i]))) {
            /* A moment for the launcher to forward what this process wrote (see below). */
            struct timespec pause = {0, 200 * 1000 * 1000};
            nanosleep(&pause, NULL);
            fprintf(stderr, "[tessera] the launcher runs with recovery on (it would exit 0 "
                    "whatever its processes do): ending it (%s, pid %d) so that the job "
                    "fails\n", comm, (int)parent);
            fflush(stderr);
            kill(parent, SIGTERM);
            return;
        }
    fprintf(stderr, "[tessera] the launcher runs with recovery on: it may exit 0 although this "
            "process failed\n");
    fflush(stderr);
}

static void core_abort(int code)
{
    core_abort_launcher();
    if (tess_core.initialized &&
        (tess_core.mpi_thread_level == MPI_THREAD_MULTIPLE ||
         pthread_equal(pthread_self(), tess_core.main_thread))) {
        /* The launcher forwards what this process wrote (the reason it aborts) through a
         * pipe; MPI_Abort at once can end the job before that is read (MPICH's hydra lost it
         * about once in 40 aborts on a loaded 2-core machine). A moment first. */
        struct timespec pause = {0, 200 * 1000 * 1000};
        nanosleep(&pause, NULL);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
    /* Another thread may not call MPI: a non-zero exit makes the launcher end the job. */
    _exit(code);
}

tess_status_t tess_core_layer_add(const tess_core_layer_t *layer)
{
    if (tess_core.nlayers >= TESS_LAYER_MAX)
        return tess_error(TESS_ERR_NO_MEMORY, "too many layers adding %s", layer->name);
    tess_core.layers[tess_core.nlayers++] = *layer;
    return TESS_OK;
}

static const char *thread_level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE:     return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:   return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:   return "MPI_THREAD_MULTIPLE";
    }
    return "unknown";
}

static tess_status_t core_check_mpi(void)
{
    int flag = 0;
    MPI_Initialized(&flag);
    if (!flag)
        return tess_error(TESS_ERR_MPI, "tess_init: MPI is not initialised (call "
                          "MPI_Init_thread with MPI_THREAD_FUNNELED or higher first)");
    MPI_Finalized(&flag);
    if (flag)
        return tess_error(TESS_ERR_MPI, "tess_init: MPI is already finalized");
    MPI_Query_thread(&tess_core.mpi_thread_level);
    if (tess_core.mpi_thread_level < MPI_THREAD_FUNNELED)
        return tess_error(TESS_ERR_MPI, "tess_init: MPI provides %s; Tessera needs at least "
                          "MPI_THREAD_FUNNELED (initialise MPI with MPI_Init_thread)",
                          thread_level_name(tess_core.mpi_thread_level));
    if (tess_core.mpi_thread_level == MPI_THREAD_FUNNELED) {
        MPI_Is_thread_main(&flag);
        if (!flag)
            return tess_error(TESS_ERR_MPI, "tess_init: with MPI_THREAD_FUNNELED, call tess_init "
                              "from the thread that initialised MPI");
    }
    return TESS_OK;
}

/* Physical nodes from MPI's shared-memory split; virtual nodes from TESS_VNODE_SIZE. */
static tess_status_t core_topology(void)
{
    MPI_Comm node_comm;
    if (MPI_Comm_split_type(tess_rt.comm, MPI_COMM_TYPE_SHARED, tess_rt.rank, MPI_INFO_NULL,
                            &node_comm) != MPI_SUCCESS)
        return tess_error(TESS_ERR_MPI, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) failed");
    MPI_Comm_rank(node_comm, &tess_rt.node_rank);
    MPI_Comm_size(node_comm, &tess_rt.node_size);
    int leader = tess_rt.rank;
    MPI_Bcast(&leader, 1, MPI_INT, 0, node_comm);
    MPI_Comm_free(&node_comm);

    tess_rt.node_of  = tess_calloc((size_t)tess_rt.size, sizeof(int), "node table");
    tess_rt.vnode_of = tess_calloc((size_t)tess_rt.size, sizeof(int), "virtual-node table");
    if (!tess_rt.node_of || !tess_rt.vnode_of)
        return TESS_ERR_NO_MEMORY;
    if (MPI_Allgather(&leader, 1, MPI_INT, tess_rt.node_of, 1, MPI_INT, tess_rt.comm) !=
        MPI_SUCCESS)
        return tess_error(TESS_ERR_MPI, "MPI_Allgather of node leaders failed");
    tess_rt.node = leader;

    int k = tess_cfg.vnode_size;
    if (k <= 0) {
        memcpy(tess_rt.vnode_of, tess_rt.node_of, (size_t)tess_rt.size * sizeof(int));
        tess_rt.vnode      = tess_rt.node;
        tess_rt.vnode_rank = tess_rt.node_rank;
        tess_rt.vnode_size = tess_rt.node_size;
        return TESS_OK;
    }
    for (int r = 0; r < tess_rt.size; r++) {
        tess_rt.vnode_of[r] = r / k;
        if (tess_rt.node_of[r] != tess_rt.node_of[(r / k) * k])
            return tess_error(TESS_ERR_INVALID, "TESS_VNODE_SIZE=%d puts ranks %d and %d of "
                              "different nodes into one virtual node", k, (r / k) * k, r);
    }
    tess_rt.vnode      = tess_rt.rank / k;
    tess_rt.vnode_rank = tess_rt.rank % k;
    tess_rt.vnode_size = TESS_MIN(k, tess_rt.size - tess_rt.vnode * k);
    return TESS_OK;
}

static void core_print_mapping(void)
{
    char line[256];
    snprintf(line, sizeof(line), "process %d: node %d (local %d/%d), vnode %d, PEs %d-%d, "
             "GPU backend %s device %d of %d, completions by %s", tess_rt.rank, tess_rt.node,
             tess_rt.node_rank, tess_rt.node_size, tess_rt.vnode, tess_rt.rank * tess_rt.ppn,
             tess_rt.rank * tess_rt.ppn + tess_rt.ppn - 1, tess_gpu->name,
             tess_gpu_device(), tess_gpu_num_devices(),
             tess_gpuq_signals() ? "stream signals" : "events");
    char *all = tess_rt.rank == 0 ? malloc((size_t)tess_rt.size * sizeof(line)) : NULL;
    MPI_Gather(line, sizeof(line), MPI_CHAR, all, sizeof(line), MPI_CHAR, 0, tess_rt.comm);
    if (all) {
        fprintf(stderr, "[tessera] %d processes x %d PEs, job %016llx\n", tess_rt.size,
                tess_rt.ppn, (unsigned long long)tess_rt.job_id);
        for (int r = 0; r < tess_rt.size; r++)
            fprintf(stderr, "[tessera]   %s\n", all + (size_t)r * sizeof(line));
        if (tess_rt.rank == 0 && tess_cfg.log_level >= TESS_LOG_INFO)
            tess_config_print(stderr);
        fflush(stderr);
        free(all);
    }
}

/* ---- processes of this node that are gone ------------------------------------------------ */

/* A process killed without its launcher ending the job would leave the others waiting for it
 * for ever (in a quiescence wave, a reduction, a collective call). Those of this node are
 * watched by their pids: checked at most once a second by PE 0 while it polls MPI. Processes
 * of other nodes are the launcher's and MPI's to report. */
static struct {
    int     *pid;     /* [rank] */
    uint8_t *watch;   /* [rank]: same node and its pid visible here */
    uint64_t next_ns; /* next check */
} peers;

static tess_status_t core_peers_init(void)
{
    int me      = (int)getpid();
    peers.pid   = tess_calloc((size_t)tess_rt.size, sizeof(int), "process ids");
    peers.watch = tess_calloc((size_t)tess_rt.size, 1, "process watch");
    if (!peers.pid || !peers.watch)
        return TESS_ERR_NO_MEMORY;
    if (MPI_Allgather(&me, 1, MPI_INT, peers.pid, 1, MPI_INT, tess_rt.comm) != MPI_SUCCESS)
        return tess_error(TESS_ERR_MPI, "MPI_Allgather of process ids failed");
    /* Alive now (they just answered): a pid that cannot be seen is in another pid namespace,
     * and is not watched. TESS_TEST_PEER_WATCH=0 watches none (tests of the network's own
     * report of a peer that is gone). */
    const char *w = getenv("TESS_TEST_PEER_WATCH");
    for (int r = 0; r < tess_rt.size && !(w && !strcmp(w, "0")); r++)
        peers.watch[r] = r != tess_rt.rank && tess_rt.node_of[r] == tess_rt.node &&
                         (kill((pid_t)peers.pid[r], 0) == 0 || errno == EPERM);
    peers.next_ns = 0;
    return TESS_OK;
}

static void core_peers_fini(void)
{
    free(peers.pid);
    free(peers.watch);
    memset(&peers, 0, sizeof(peers));
}

void tess_core_peers_check(void)
{
    uint64_t now = tess_time_ns();
    if (!peers.watch || now < peers.next_ns)
        return;
    peers.next_ns = now + 1000ull * 1000 * 1000;
    for (int r = 0; r < tess_rt.size; r++)
        if (peers.watch[r] && kill((pid_t)peers.pid[r], 0) != 0 && errno == ESRCH)
            tess_fatal("process %d (pid %d, on this node) is gone: it ended without "
                       "tess_finalize (killed, or crashed) and the job cannot go on without it",
                       r, peers.pid[r]);
}

/* ---- MPI_Finalize before tess_finalize ---------------------------------------------------- */

/* MPI deletes the attributes of MPI_COMM_SELF first thing in MPI_Finalize: one set at init and
 * removed by tess_finalize tells a program that finalizes MPI while Tessera still runs, which
 * would otherwise end quietly with status 0 (PE threads, segments and endpoints left behind). */
static int core_self_key = MPI_KEYVAL_INVALID;

static int core_self_delete(MPI_Comm comm, int key, void *value, void *extra)
{
    (void)comm, (void)key, (void)value, (void)extra;
    if (tess_core.initialized && !tess_core.finalizing)
        tess_fatal("MPI_Finalize was called while Tessera is initialised: call tess_finalize "
                   "first (every process, after its last tess_run); the job fails");
    return MPI_SUCCESS;
}

static void core_self_watch(void)
{
    if (core_self_key == MPI_KEYVAL_INVALID &&
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, core_self_delete, &core_self_key, NULL) !=
            MPI_SUCCESS) {
        core_self_key = MPI_KEYVAL_INVALID;
        return;
    }
    MPI_Comm_set_attr(MPI_COMM_SELF, core_self_key, NULL);
}

static void core_self_unwatch(void)
{
    if (core_self_key != MPI_KEYVAL_INVALID)
        MPI_Comm_delete_attr(MPI_COMM_SELF, core_self_key);
}

tess_status_t tess_core_init(int *argc, char ***argv, MPI_Comm comm, const tess_params_t *params)
{
    tess_status_t st;
    if (tess_core.initialized)
        return tess_error(TESS_ERR_STATE, "tess_init: Tessera is already initialised");
    st = core_check_mpi();
    if (st != TESS_OK)
        return st;
    if (comm == MPI_COMM_NULL)
        return tess_error(TESS_ERR_INVALID, "tess_init: the communicator is MPI_COMM_NULL");
    st = tess_config_load(argc, argv, params);
    if (st != TESS_OK)
        return st;

    memset(&tess_rt, 0, sizeof(tess_rt));
    tess_core.main_thread = pthread_self();
    if (MPI_Comm_dup(comm, &tess_rt.comm) != MPI_SUCCESS)
        return tess_error(TESS_ERR_MPI, "tess_init: MPI_Comm_dup failed");
    MPI_Comm_rank(tess_rt.comm, &tess_rt.rank);
    MPI_Comm_size(tess_rt.comm, &tess_rt.size);
    tess_log_set_rank(tess_rt.rank);
    if (tess_rt.rank == 0)
        tess_config_check_env();
    MPI_Comm_dup(tess_rt.comm, &tess_core.agent_comm);
    MPI_Comm_dup(tess_rt.comm, &tess_core.wave_comm);
    MPI_Comm_dup(tess_rt.comm, &tess_core.coll_comm);
    if ((st = tess_coll_init()) != TESS_OK)
        goto err_free_comms;

    int ppn_range[2] = {-tess_cfg.ppn, tess_cfg.ppn};
    MPI_Allreduce(MPI_IN_PLACE, ppn_range, 2, MPI_INT, MPI_MAX, tess_rt.comm);
    if (-ppn_range[0] != ppn_range[1]) {
        st = tess_error(TESS_ERR_MISMATCH, "tess_init: the processes ask for different numbers "
                        "of PEs (%d to %d); +ppn/TESS_PPN must be the same everywhere",
                        -ppn_range[0], ppn_range[1]);
        goto err_free_comms;
    }
    tess_rt.ppn = tess_cfg.ppn;

    tess_rt.job_id = tess_rt.rank == 0 ? tess_random64() : 0;
    MPI_Bcast(&tess_rt.job_id, 1, MPI_UINT64_T, 0, tess_rt.comm);
    tess_core_trace_init();

    st = core_topology();
    if (st == TESS_OK)
        st = core_peers_init();
    if (st != TESS_OK)
        goto err_free_topology;

    tess_gpu_init_params_t gp = {
        .job_id          = tess_rt.job_id,
        .rank            = tess_rt.rank,
        .local_rank      = tess_rt.node_rank,
        .local_size      = tess_rt.node_size,
        .host_arena_size = tess_cfg.host_arena,
        .host_device_memory = tess_cfg.host_device_memory,
        .host_pinned_memory = tess_cfg.host_pinned_memory,
        .host_threads    = tess_cfg.host_threads,
        .host_jitter_us  = tess_cfg.host_jitter_us,
        .host_fault_kernel = tess_cfg.host_fault_kernel,
        .host_devices    = tess_cfg.host_devices,
    };
    st = tess_gpu_init(tess_cfg.gpu, &gp, tess_cfg.streams);
    /* Every rank must agree that the device layer came up before anything collective. */
    int ok = st == TESS_OK, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, tess_rt.comm);
    if (!all_ok) {
        if (st == TESS_OK) {
            tess_gpu_fini();
            st = tess_error(TESS_ERR_GPU, "tess_init: the device layer failed on another rank");
        }
        goto err_free_topology;
    }

    tess_net_params_t np = {.comm = tess_rt.comm, .wakeup = 1,
                            .peer_failure = tess_cfg.peer_failure,
                            .lanes = tess_cfg.net_lanes == 0 ? tess_rt.ppn : 1,
                            .eager_node = tess_cfg.net_eager_node,
                            .node_of = tess_rt.node_of};
    st = tess_net_init(&np);
    if (st != TESS_OK)
        goto err_gpu_fini;
    st = tess_msg_net_init();
    if (st == TESS_OK)
        st = tess_msg_shm_init();
    if (st != TESS_OK)
        goto err_net_fini;

    tess_core.nhandlers = 0;
    tess_core.nlayers   = 0;
    tess_core.ready     = 0;
    atomic_store(&tess_core.net_watcher, -1);
    atomic_store(&tess_core.phase, PHASE_IDLE);
    pthread_mutex_init(&tess_core.park_lock, NULL);
    pthread_cond_init(&tess_core.park_cond, NULL);
    if ((st = tess_agent_init()) != TESS_OK || (st = tess_phase_init()) != TESS_OK ||
        (st = tess_reduce_init()) != TESS_OK)
        goto err_net_fini;
    st = tess_pe_create_all();
    if (st != TESS_OK)
        goto err_reduce_fini;

    tess_set_abort_fn(core_abort);
    tess_core.initialized = 1;
    tess_core.finalizing  = 0;
    core_self_watch();
    if (tess_cfg.verbose)
        core_print_mapping();
    return TESS_OK;

err_reduce_fini:
    tess_reduce_fini();
    tess_phase_fini();
    tess_agent_fini();
err_net_fini:
    tess_net_fini();
    tess_msg_shm_fini();
err_gpu_fini:
    tess_gpu_fini();
err_free_topology:
    core_peers_fini();
    free(tess_rt.node_of);
    free(tess_rt.vnode_of);
err_free_comms:
    tess_coll_fini();
    MPI_Comm_free(&tess_core.coll_comm);
    MPI_Comm_free(&tess_core.wave_comm);
    MPI_Comm_free(&tess_core.agent_comm);
    MPI_Comm_free(&tess_rt.comm);
    return st;
}

tess_status_t tess_core_start(void)
{
    tess_status_t st = tess_pe_start_all();
    if (st != TESS_OK)
        return st;
    MPI_Barrier(tess_rt.comm);
    return TESS_OK;
}

tess_status_t tess_core_fini(void)
{
    if (!tess_core.initialized)
        return tess_error(TESS_ERR_STATE, "tess_finalize: Tessera is not initialised");
    if (!pthread_equal(pthread_self(), tess_core.main_thread))
        return tess_error(TESS_ERR_STATE, "tess_finalize must be called by the thread that "
                          "called tess_init");
    if (atomic_load(&tess_core.phase) != PHASE_IDLE)
        return tess_error(TESS_ERR_STATE, "tess_finalize inside tess_run");
    tess_core.finalizing = 1;
    core_self_unwatch();
    /* Everyone is out of its last phase before endpoints close. */
    MPI_Barrier(tess_rt.comm);
    tess_pe_destroy_all();
    tess_core_trace_fini();
    tess_reduce_fini();
    tess_phase_fini();
    tess_agent_fini();
    tess_net_fini();
    tess_msg_shm_fini();
    tess_gpu_fini();
    core_peers_fini();
    free(tess_rt.node_of);
    free(tess_rt.vnode_of);
    tess_coll_fini();
    MPI_Comm_free(&tess_core.coll_comm);
    MPI_Comm_free(&tess_core.wave_comm);
    MPI_Comm_free(&tess_core.agent_comm);
    MPI_Comm_free(&tess_rt.comm);
    pthread_mutex_destroy(&tess_core.park_lock);
    pthread_cond_destroy(&tess_core.park_cond);
    tess_set_abort_fn(NULL);
    tess_core.initialized = 0;
    tess_core.nhandlers   = 0;
    tess_core.nlayers     = 0;
    return TESS_OK;
}
