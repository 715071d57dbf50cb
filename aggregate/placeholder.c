/* Keeps the cn_agg library non-empty until its sources land. */
int cn_agg__placeholder(void);
int cn_agg__placeholder(void)
{
    return 0;
}
