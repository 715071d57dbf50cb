/* clockread.c — time spent outside the program's own code, for the sampler's tests:
 *   clockread SECONDS clock    main -> clock_loop: clock_gettime in a loop (the vDSO)
 *   clockread SECONDS kernel   main -> zero_loop: 1 MiB reads of /dev/zero (the kernel)
 * Built without a build-id, so its object identity is device:inode:mtime. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "wl_common.h"

volatile uint64_t wl_sink;

__attribute__((noinline)) static void clock_loop(uint64_t end)
{
    uint64_t n = 0;
    while (wl_now_ns() < end)
        n++;
    wl_sink = n;
}

__attribute__((noinline)) static void zero_loop(uint64_t end)
{
    static char buf[1 << 20];
    int fd = open("/dev/zero", O_RDONLY);
    if (fd < 0)
        return;
    while (wl_now_ns() < end)
        if (read(fd, buf, sizeof(buf)) < 0)
            break;
    wl_sink = (uint64_t)buf[0];
    close(fd);
}

int main(int argc, char **argv)
{
    double secs = wl_seconds(argc, argv, 1);
    uint64_t end = wl_now_ns() + (uint64_t)(secs * 1e9);
    if (argc > 2 && strcmp(argv[2], "kernel") == 0)
        zero_loop(end);
    else
        clock_loop(end);
    printf("clockread done\n");
    return 0;
}
