/* Keeps the cn_smp library non-empty until its sources land. */
int cn_smp__placeholder(void);
int cn_smp__placeholder(void)
{
    return 0;
}
