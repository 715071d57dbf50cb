/* cn_int.h — interpreter frames captured at sample time: the whole API of interp/.
 *
 * A native unwind of a CPython ≥ 3.11 process shows _PyEval_EvalFrameDefault, never the Python
 * functions: their frames live in heap chunks, and a read from user space after the sample
 * pairs the native stack with a later Python stack. interp/ captures the interpreter's frame
 * chain *in* the sample: a BPF program (bpf/python.bpf.c, compiled with clang and embedded as a
 * libbpf skeleton) runs in the overflow handler of the session's perf events and writes one
 * record per sample of a registered process into a BPF ring buffer.
 *
 * How data flows:
 *   1. cn_int_new() loads the program; cn_int_attach() attaches it to each perf event fd.
 *   2. cn_int_register(pid) detects CPython in the process (the executable or a mapped
 *      libpython3.X.so, its version, the address of _PyRuntime), picks the version's layout
 *      (tables for 3.8–3.12, _Py_DebugOffsets read from the process for 3.13) and hands it to
 *      the program; or refuses, saying why (the caller shows "python frames: off (why)").
 *   3. On every sample of that process the program writes a cn_int_record: pid, tid, CPU, the
 *      perf sample's own time, and the frames, innermost first: code object address,
 *      instruction offset, whether the frame is the first an eval-loop call ran.
 *   4. The sampler joins a record to its perf sample by (pid, tid, time): cn_int_take(). The
 *      time is the sample's PERF_SAMPLE_TIME itself (CLOCK_MONOTONIC), read by the program
 *      from perf_sample_data, which the kernel fills before running it (docs/python.md).
 *   5. cn_int_func() resolves (pid, code object) into qualname, file and first line, reading the
 *      target with process_vm_readv, bounded, cached per (pid, code object); cn_int_line() maps
 *      an instruction offset to a line with the version's line table.
 *
 * Nothing here logs, exits or calls sampler/ or live/ (libbpf itself prints its warnings and a
 * refused program's verifier log through its print callback, stderr by default: the program's
 * main() decides, with libbpf_set_print). A hostile target yields
 * "[python: unreadable]" names and short walks, never a crash. One context per session (or per
 * daemon); not thread-safe. Functions return 0 or a negative errno with err filled.
 */
#ifndef CN_INT_H
#define CN_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cn_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CN_INT_MAX_FRAMES 128
#define CN_INT_UNREADABLE "[python: unreadable]"

typedef struct cn_int_ctx cn_int_ctx;

/* One captured frame. instr is the instruction's index in code units (2 bytes) whatever the
 * version stores (f_lasti in bytes in 3.8/3.9, in units in 3.10, a pointer from 3.11); -1 when
 * the frame has not started. */
typedef struct cn_int_frame {
    uint64_t code;
    int32_t instr;
    bool entry; /* the first frame of one eval-loop call: one _PyEval_EvalFrameDefault (plus its
                   entry trampolines) on the native stack stands for this frame and the ones
                   called from it up to the next entry frame */
} cn_int_frame;

enum cn_int_status {
    CN_INT_OK = 0,
    CN_INT_NO_THREAD = 1, /* the thread has no PyThreadState (yet; a thread that gets one is
                             found within 50 ms): no Python frames */
    CN_INT_FAULT = 2,     /* a read failed mid-walk: the frames up to it */
    CN_INT_TRUNCATED = 3, /* deeper than CN_INT_MAX_FRAMES: the innermost ones */
    CN_INT_AMBIGUOUS = 4, /* the process runs sub-interpreters and the thread has thread states
                             in several of them, none known to be its current one (3.8–3.11,
                             which keep no such mark; 3.12's run_string, which borrows another
                             thread's state): no frames rather than maybe another's */
    CN_INT_STALE = 5,     /* the innermost eval-loop call's frames did not end at its caller's
                             current frame, as CPython asserts they do: a call caught between
                             publishing its _PyCFrame and writing its current_frame, which then
                             held what an earlier call left on the C stack (3.11, 3.12): no
                             frames rather than another moment's */
};

/* One sample's interpreter frames, as the program captured them. */
typedef struct cn_int_record {
    uint32_t pid, tid, cpu; /* pid is the tgid; both in the pid namespace of the process that
                               called cn_int_new, as its perf events report them */
    uint64_t time;          /* the perf sample's time when sample_time, else bpf_ktime_get_ns()
                               a little before it (same clock) */
    bool sample_time;
    int status; /* enum cn_int_status */
    bool multi; /* the process had more than one interpreter (sub-interpreters) at the sample */
    bool sub;   /* the frames are a sub-interpreter's, interp its id (the main one's is 0) */
    uint32_t interp;
    uint32_t nsub; /* sub: frames [0, nsub) are the sub-interpreter's, the rest (3.12+, a thread
                      with one other state) its frames in the interpreter that called into it */
    uint32_t nframes;
    cn_int_frame frames[CN_INT_MAX_FRAMES]; /* innermost first */
} cn_int_record;

/* What cn_int_register found. */
typedef struct cn_int_proc {
    int major, minor;              /* 3, 11 */
    uint64_t runtime;              /* address of _PyRuntime */
    char object[256];              /* the file holding it (executable or libpython) */
    uint64_t eval_start, eval_end; /* _PyEval_EvalFrameDefault's addresses in the process (0, 0
                                      when its symbol is absent): the frames the splice replaces */
    bool debug_offsets;            /* layout read from the process's _Py_DebugOffsets (3.13+) */
    uint64_t self_off; /* thread pointer - pthread_self(): 0 on x86-64, on arm64 the size of the
                          process's glibc struct pthread (its _thread_db_sizeof_pthread) */
} cn_int_proc;

/* Counters kept by the program, summed over CPUs. */
typedef struct cn_int_stats {
    uint64_t runs;       /* samples of registered processes */
    uint64_t records;    /* records written */
    uint64_t ring_full;  /* records lost to a full ring */
    uint64_t cache_hits; /* thread state found in the per-thread cache */
    uint64_t walks;      /* thread-state searches */
    uint64_t other;      /* samples of processes not registered (the program returned at once) */
    uint64_t no_thread;  /* samples of a thread without a thread state, known from a search less
                            than 50 ms before (a native thread: searched again after that) */
    uint64_t checks;     /* code-object checks the program did (cn_int_new_epoch) */
    uint64_t checks_changed; /* code objects they found changed (read again at next use) */
    uint64_t stale;          /* walks dropped as CN_INT_STALE */
} cn_int_stats;

/* Loads the BPF program (needs CAP_BPF and CAP_PERFMON). *out is freed with cn_int_free.
 * -EPERM, -ENOSYS, … with the kernel's reason in err. */
int cn_int_new(cn_int_ctx **out, cn_err *err);
cn_int_ctx *cn_int_free(cn_int_ctx *c); /* NULL accepted; returns NULL */

/* Attaches the program to a sampling perf event (PERF_EVENT_IOC_SET_BPF; the event's enabled
 * state is left alone). The event must have PERF_SAMPLE_TIME with use_clockid CLOCK_MONOTONIC
 * for the join. Events inherited from it (inherit = 1) carry the program. The event holds the
 * program until it is closed: close the events before cn_int_free. */
int cn_int_attach(cn_int_ctx *c, int perf_fd, cn_err *err);

/* Detects CPython in pid and starts capturing its frames. -ENOENT not CPython, -ENOTSUP a
 * version without a layout, -ESRCH gone, …; err says why in a few words. *info may be NULL. */
int cn_int_register(cn_int_ctx *c, pid_t pid, cn_int_proc *info, cn_err *err);
/* Stops capturing pid and forgets its cached code objects (call on exit or exec). */
void cn_int_unregister(cn_int_ctx *c, pid_t pid);

/* The ring buffer's fd, for an event loop: readable once the ring is a quarter full (the
 * program does not wake the reader for each record; cn_int_take drains on demand). */
int cn_int_ring_fd(const cn_int_ctx *c);

/* Moves every record waiting in the ring into the context's queue. Returns how many, or a
 * negative errno. */
int cn_int_drain(cn_int_ctx *c);

/* The record of the perf sample (pid, tid, time): searched in the queue, and on a miss after
 * draining the ring (the program commits its record before the sample reaches the perf ring).
 * A record with sample_time matches time exactly; one with a ktime matches that thread's
 * latest record at or before time, within 1 ms (before 6.3 the program runs before the
 * kernel takes the sample's time). Returns 1 and *out (the record leaves the
 * queue), 0 when there is none (the ring was full, or the process is not registered). */
int cn_int_take(cn_int_ctx *c, uint32_t pid, uint32_t tid, uint64_t time, cn_int_record *out);

/* Reads the frames of thread tid of a registered process now, from user space, and queues
 * them as the record of a sample (pid, tid, time) for cn_int_take: for a thread that is off
 * CPU, whose frame chain cannot change while it waits (a thread already waiting when a
 * session began watching it has no sample of its own). The thread state is found by its
 * native_thread_id (3.11+), or (3.8–3.10) by the tid glibc keeps in the descriptor its
 * thread_id (pthread_self()) points at, where the process's libc says that is (the
 * _thread_db_ objects it exports for gdb's libthread_db). A thread with several states (in
 * sub-interpreters; or a state left by an ended thread whose descriptor a new one reuses)
 * gets none: status CN_INT_AMBIGUOUS across interpreters, else no frames. 0 (also when the
 * thread has no thread state: a record without frames), -ENOENT pid not registered,
 * -EAGAIN 3.8–3.10 whose libc is not mapped yet, -ENOTSUP 3.8–3.10 whose libc does not
 * say (musl), -ENOMEM. */
int cn_int_capture(cn_int_ctx *c, uint32_t pid, uint32_t tid, uint64_t time);

/* Drops queued records older than time (samples the sampler will never ask for). Returns how
 * many were dropped. */
size_t cn_int_expire(cn_int_ctx *c, uint64_t time);

/* The next queued record, oldest first (tests, tools): 1 and *out, or 0. */
int cn_int_next(cn_int_ctx *c, cn_int_record *out);

/* A code object's names. Strings are NUL-terminated UTF-8; a field that could not be read
 * is CN_INT_UNREADABLE (name) or "" (file); valid until cn_int_unregister or cn_int_free. */
typedef struct cn_int_func {
    const char *name;     /* co_qualname (co_name before 3.11) */
    const char *filename; /* co_filename */
    int first_line;       /* co_firstlineno, 0 unknown */
    bool readable;        /* false: a forged or freed code object */
} cn_int_func;

/* Resolves a code object of a registered process (cached per (pid, code)). Returns 0 and
 * *out (also for an unreadable object, then readable is false), -ENOENT pid not registered. */
int cn_int_func_of(cn_int_ctx *c, uint32_t pid, uint64_t code, cn_int_func *out);

/* Starts a new epoch of the code-object caches: an entry used after this call is first checked
 * to be the same object still (its type, name and file pointers), and read again if not, so a
 * code object freed and another allocated at its address is not named after the old one. The
 * objects used in the epoch before (up to 64 per process) are handed to the BPF program, which
 * checks them at its next sample of the process and answers in its ring: they stay valid
 * meanwhile, and those it finds changed are read again at their next use after the answer was
 * drained (a replaced object is named anew up to two epochs later). The others are checked
 * at their first use, one read each. The sampler calls it at most every 100 ms. */
void cn_int_new_epoch(cn_int_ctx *c);

/* How many cached code objects were found changed so far (by the program's checks): a caller
 * that keeps names of its own (the sampler's frames) checks them again when it moves. */
uint64_t cn_int_changes(const cn_int_ctx *c);
/* The line of instruction instr (code units) in a code object: > 0, or 0 when the line
 * table has none or could not be read. */
int cn_int_line(cn_int_ctx *c, uint32_t pid, uint64_t code, int32_t instr);

/* Whether pc, a native frame's address in process pid, is in _PyEval_EvalFrameDefault of its
 * registered interpreter: the native frames a splice replaces with Python frames (the sampler
 * knows addresses, not names, when it unwinds). */
bool cn_int_is_eval(const cn_int_ctx *c, uint32_t pid, uint64_t pc);

/* The program's counters. */
int cn_int_stats_get(const cn_int_ctx *c, cn_int_stats *out);

/* The BPF program's id (bpftool prog show id N: run_time_ns, run_cnt). */
uint32_t cn_int_prog_id(const cn_int_ctx *c);

#ifdef __cplusplus
}
#endif
#endif /* CN_INT_H */
