/* app.c — the containers' workload (test_container_names.sh): calls libwork.so's
 * work_entry until killed. */
void work_entry(void);

int main(void)
{
    for (;;)
        work_entry();
}
