/* Keeps the cn_sym library non-empty until its sources land. */
int cn_sym__placeholder(void);
int cn_sym__placeholder(void)
{
    return 0;
}
