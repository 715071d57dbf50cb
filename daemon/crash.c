/* crash.c — canopyd's last words: a fatal signal is reported on stderr (the journal under
 * systemd, canopyd.log in the tests) before the daemon dies of it.
 *
 * On SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT and SIGSYS (a seccomp filter's kill) the
 * handler writes one line, "canopyd: fatal signal 11 (SIGSEGV) at 0x10, thread 1234
 * (canopyd)", then "canopyd: backtrace:" and one frame per line (backtrace_symbols_fd:
 * "canopyd(cn_d_server_run+0x2a)[0x…]"; canopyd is linked with -rdynamic so its global
 * functions are named, static ones show as "canopyd(+0xOFFSET)" for addr2line). Then the
 * default action is restored and the signal raised again, so the exit status and the core
 * dump are the real ones and systemd (Restart=on-failure) starts canopyd again; sessions
 * saved in the state dir come back.
 *
 * Only async-signal-safe calls run in the handler: write(2), prctl(2), gettid, sigaction,
 * raise, and backtrace()/backtrace_symbols_fd(), which allocate nothing once libgcc's
 * unwinder is loaded (cn_d_crash_install calls backtrace() once for that). The handler
 * needs no global state: everything it prints comes from siginfo_t and the kernel.
 *
 * Stacks: the handler runs on an alternate signal stack (SA_ONSTACK), so a stack overflow
 * is reported too. sigaltstack is per thread and not inherited by new threads: the main
 * thread (event loop, handlers, stores) gets one here; the symbolizer's worker thread
 * (ELF/DWARF readers on untrusted files, where a deep recursion is likeliest) and the
 * fleet pusher make their own (cn_common_altstack_new). A forked query worker or writer
 * inherits the forking thread's altstack and the handlers, so its crash is reported too.
 *
 * Under AddressSanitizer its own report (the faulting access, shadow memory, symbolized
 * stacks) is better than this one: the handlers ASan installed (SIGSEGV, SIGBUS, SIGFPE by
 * default) are kept; the signals it leaves alone (SIGABRT, SIGILL, SIGSYS) get this one. */
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cn_d.h"

#if defined(__SANITIZE_ADDRESS__)
#define CRASH_KEEP_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CRASH_KEEP_SANITIZER 1
#endif
#endif

#define MAX_FRAMES 64

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGSYS};

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV:
        return "SIGSEGV";
    case SIGBUS:
        return "SIGBUS";
    case SIGFPE:
        return "SIGFPE";
    case SIGILL:
        return "SIGILL";
    case SIGABRT:
        return "SIGABRT";
    case SIGSYS:
        return "SIGSYS";
    }
    return "?";
}

/* A line being built without snprintf (not async-signal-safe): appends clip at the end. */
typedef struct {
    char b[256];
    size_t n;
} line;

static void put(line *l, const char *s)
{
    while (*s && l->n < sizeof(l->b) - 1)
        l->b[l->n++] = *s++;
}

static void put_num(line *l, unsigned long long v, unsigned base)
{
    char d[24];
    size_t k = 0;
    do {
        d[k++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    if (base == 16)
        put(l, "0x");
    while (k && l->n < sizeof(l->b) - 1)
        l->b[l->n++] = d[--k];
}

/* Where the signal came from: the faulting address for one the kernel raised on an
 * instruction, the system call a seccomp filter refused, the sender of a kill(). */
static void put_origin(line *l, int sig, const siginfo_t *si)
{
    if (si->si_code <= 0) { /* SI_USER, SI_TKILL, SI_QUEUE: kill(), raise(), abort() */
        put(l, " sent by pid ");
        put_num(l, (unsigned long long)si->si_pid, 10);
    } else if (sig == SIGSYS) {
        put(l, " on system call ");
        put_num(l, (unsigned long long)si->si_syscall, 10);
    } else {
        put(l, " at ");
        put_num(l, (unsigned long long)(uintptr_t)si->si_addr, 16);
    }
}

static void on_fatal(int sig, siginfo_t *si, void *uctx)
{
    (void)uctx;
    line l = {.n = 0};
    char comm[17] = {0};
    prctl(PR_GET_NAME, comm, 0, 0, 0);
    put(&l, "canopyd: fatal signal ");
    put_num(&l, (unsigned)sig, 10);
    put(&l, " (");
    put(&l, signal_name(sig));
    put(&l, ")");
    put_origin(&l, sig, si);
    put(&l, ", thread ");
    put_num(&l, (unsigned long long)syscall(SYS_gettid), 10);
    put(&l, " (");
    put(&l, comm);
    put(&l, ")\ncanopyd: backtrace:\n");
    ssize_t w = write(STDERR_FILENO, l.b, l.n);
    void *frames[MAX_FRAMES];
    int n = backtrace(frames, MAX_FRAMES);
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    (void)w;
    /* Die of the signal itself: raised while it is blocked (we are in its handler), it is
     * delivered with the default action as soon as the handler returns; a fault that
     * came from an instruction would also come again on return. */
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig);
}

void cn_d_crash_install(void)
{
    void *frame[1];
    /* The first backtrace() loads libgcc_s (dlopen, malloc): never inside the handler. */
    backtrace(frame, 1);
    /* The main thread's, for the process's life (never freed). NULL when it has one. */
    (void)cn_common_altstack_new();
    struct sigaction sa = {.sa_sigaction = on_fatal, .sa_flags = SA_SIGINFO | SA_ONSTACK};
    sigfillset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++) {
#ifdef CRASH_KEEP_SANITIZER
        struct sigaction old;
        if (sigaction(fatal_signals[i], NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
            old.sa_handler == SIG_DFL)
            sigaction(fatal_signals[i], &sa, NULL);
#else
        sigaction(fatal_signals[i], &sa, NULL);
#endif
    }
}
