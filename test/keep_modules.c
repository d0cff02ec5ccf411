/* keep_modules.c — preloaded into the MPI processes of an --enable-asan build's tests
 * (test/runtests builds it). dlclose() does nothing, so every module stays loaded until exit.
 *
 * Why: Open MPI unloads its components in MPI_Finalize, and the memory it keeps until exit is
 * then checked by LeakSanitizer against test/lsan.supp, frame by frame. gcc 12's LeakSanitizer
 * rebuilds its whole module list for each frame it cannot place in a loaded module, which made
 * the leak check about 0.7 s of every process's exit (a third of the ASan suite on a 2-core
 * machine). With the components still loaded each frame is found at once, and a leak report
 * names their frames instead of bare addresses. Nothing in Tessera or its tests unloads a
 * module it still needs. */
#include <dlfcn.h>

int dlclose(void *handle)
{
    (void)handle;
    return 0;
}
