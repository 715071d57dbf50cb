/* dlopener.c — sleeps START seconds, then dlopens LIB (the dlwork library) and runs its
 * dl_work for SECONDS. Usage: dlopener LIB [SECONDS] [START], START as wl_start_wait takes
 * it (seconds, or "usr1"). */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

#include "wl_common.h"

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    double secs = argc > 2 ? atof(argv[2]) : 2;
    if (wl_start_wait(argc > 3 ? argv[3] : NULL, 0.5) < 0)
        return 2;
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    uint64_t (*fn)(double) = (uint64_t(*)(double))dlsym(h, "dl_work");
    if (!fn)
        return 1;
    printf("dl_work %llu\n", (unsigned long long)fn(secs));
    dlclose(h);
    return 0;
}
