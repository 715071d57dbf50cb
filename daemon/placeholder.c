/* Keeps the cn_daemon library non-empty until the daemon sources land. */
int cn_d__placeholder(void);
int cn_d__placeholder(void)
{
    return 0;
}
