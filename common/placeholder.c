/* Keeps the cn_common library non-empty until its sources land. */
int cn_common__placeholder(void);
int cn_common__placeholder(void)
{
    return 0;
}
