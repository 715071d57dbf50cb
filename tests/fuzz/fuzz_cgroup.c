/* libFuzzer target: /proc/PID/cgroup's text and the cgroup path it names (common/cgroup.c)
 * are written by others (the kernel from names a container runtime or a user chose): the
 * line parser, then the identity of whatever path it returns, and of the raw bytes as a
 * path. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cn_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[CN_CGROUP_PATH_MAX];
    cn_cgroup_info info;
    if (cn_cgroup_from_proc((const char *)data, size, path, sizeof(path)) == 0) {
        cn_cgroup_identify(path, &info);
        for (int k = 0; k < CN_CGROUP_N_KEYS; k++)
            (void)cn_cgroup_value_match((cn_cgroup_key)k,
                                        cn_cgroup_key_value(&info, path, (cn_cgroup_key)k), "0");
    }
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    cn_cgroup_identify(s, &info);
    free(s);
    return 0;
}
