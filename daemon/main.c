/* canopyd: placeholder until the daemon issue lands; prints its version. */
#include <stdio.h>

int main(void)
{
    printf("canopyd %s (placeholder: the daemon is not built yet)\n", CANOPY_VERSION);
    return 0;
}
