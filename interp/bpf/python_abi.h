/* python_abi.h — what the BPF program (python.bpf.c) and interp/'s user space share: the
 * per-process layout the program reads from its map, and the record it writes into its ring
 * buffer. Plain fixed-size types only (included by the BPF compile and by the C11 build).
 * Any change here changes both sides at once; the record carries no version of its own. */
#ifndef CN_INT_PYTHON_ABI_H
#define CN_INT_PYTHON_ABI_H

#include <linux/types.h>

#define CN_INT_ABI_MAX_FRAMES  128 /* frames written per record, innermost first */
#define CN_INT_ABI_MAX_THREADS 256 /* thread states searched per interpreter on a cache miss */
#define CN_INT_ABI_MAX_INTERPS 4   /* interpreters searched */
#define CN_INT_ABI_TS_ACTIVE                                                                       \
    0x10                            /* PyThreadState._status.active (3.12+: bit 4 of the word):    \
                                       the state is its thread's current one */
#define CN_INT_ABI_NONE 0xffffffffu /* an offset the version does not have */

/* How a version's frames are chained. */
enum {
    CN_INT_ABI_FRAMEOBJ = 0, /* 3.8–3.10: PyFrameObject, f_back, f_code, int f_lasti */
    CN_INT_ABI_IFRAME = 1,   /* 3.11+: _PyInterpreterFrame, previous, code, instruction pointer */
};

/* One interpreter process's layout: filled by cn_int_register (python.c), read by the program
 * for every sample of that process (map "procs", key: the tgid as the kernel sees it). */
struct cn_int_abi_layout {
    __u64 runtime;         /* address of _PyRuntime in the target */
    __u32 kind;            /* CN_INT_ABI_FRAMEOBJ or CN_INT_ABI_IFRAME */
    __u32 rt_interp_head;  /* _PyRuntime.interpreters.head; .main is the word after it */
    __u32 is_id;           /* PyInterpreterState.id (0: the main interpreter) */
    __u32 ts_status;       /* PyThreadState._status (3.12+), else NONE */
    __u32 is_next;         /* PyInterpreterState.next */
    __u32 is_threads_head; /* PyInterpreterState.tstate_head / threads.head */
    __u32 ts_next;         /* PyThreadState.next */
    __u32 ts_thread_id;    /* PyThreadState.thread_id (pthread_self()) */
    __u32 ts_frame;        /* PyThreadState.frame (≤3.10), .cframe (3.11, 3.12), .current_frame */
    __u32 cf_current_frame; /* _PyCFrame.current_frame (3.11, 3.12), else NONE; .previous is
                               the word after it in both */
    __u32 fr_code;          /* f_code / f_executable */
    __u32 fr_previous;      /* f_back / previous */
    __u32 fr_instr;         /* f_lasti (int) / prev_instr / instr_ptr (pointer) */
    __u32 fr_is_entry;      /* _PyInterpreterFrame.is_entry (3.11), else NONE */
    __u32 fr_owner;         /* _PyInterpreterFrame.owner (3.12+), else NONE */
    __u32 co_code_adaptive; /* PyCodeObject.co_code_adaptive (3.11+): instructions start */
    __u32 fr_base, fr_len;  /* the bytes of a frame read in one go: every fr_ field above lies in
                               [fr_base, fr_base + fr_len); fr_base 8-aligned, fr_len ≤ 120 */
};

#define CN_INT_ABI_FRAME_READ_MAX 120

/* The code objects user space asks the program to check (interp/ctx.c, cn_int_new_epoch):
 * that each still has the type, name and file words it was named with, i.e. was not freed and
 * another allocated at its address. The program checks them at its next sample of the process
 * (a read of the target costs it ~0.1 µs; user space's process_vm_readv ~14 µs on the
 * project's VM, a bpf() map update ~10 µs) and reports in the ring (struct
 * cn_int_abi_checked). The requests are in the memory-mapped array "checks", one slot per
 * process (procs' check_slot), written by user space without a system call, as a sequence
 * lock: seq odd while it writes, even once the request is whole; the program checks a
 * request whose seq is even and not done, and answers only if seq did not move meanwhile. */
#define CN_INT_ABI_CHECK_MAX   64 /* code objects per request; a power of two */
#define CN_INT_ABI_CHECK_SLOTS 64 /* processes with a slot (the others: user space reads) */
struct cn_int_abi_check {
    __u64 seq;    /* the request's number, even (0: none) */
    __u64 done;   /* written by the program: the last seq it checked */
    __u32 n;      /* objects listed */
    __u32 off[3]; /* offsets of the words checked: ob_type, the name, co_filename */
    __u64 addr[CN_INT_ABI_CHECK_MAX];
    __u64 want[CN_INT_ABI_CHECK_MAX][3];
};

/* A registered process (map "procs"): its layout and its slot in "checks" (user space), and
 * whether it runs several interpreters (the program: _PyRuntime.interpreters.head != .main,
 * read again CN_INT_ABI_MULTI_NS after the last read; 0 at registration). */
#define CN_INT_ABI_MULTI_NS 10000000ull
struct cn_int_abi_proc {
    struct cn_int_abi_layout l;
    __u32 check_slot; /* CN_INT_ABI_NONE: none */
    __u32 multi;      /* the program's: several interpreters, at multi_ns */
    __u64 multi_ns;   /* the program's: bpf_ktime_get_ns() of that read (0: never) */
    __u64 head, main; /* the program's: interpreters.head and .main then */
    __u64 self_off;   /* pthread_self() = thread pointer - self_off: 0 on x86-64 (the fs base
                         is the struct pthread), glibc's sizeof(struct pthread) on arm64;
                         CN_INT_ABI_SELF_PENDING while not known (no thread is searched) */
};
#define CN_INT_ABI_SELF_PENDING (~0ull)

/* The answer to a check, in the ring beside the sample records (and shorter than any). */
struct cn_int_abi_checked {
    __u64 seq;
    __u64 changed; /* bit i: object i no longer has its words (or could not be read) */
    __u32 pid;
    __u32 n;
};

/* 3.11+: a frame's caller is most often right below it in the thread's data-stack chunk, so
 * a frame read that misses the bytes read before reads up to this many bytes ending at the
 * frame's end, from no lower than the start of the frame's page (no fault a frame read alone
 * would not have); one read then serves several frames. Falls back to the frame's own bytes
 * when the larger read faults. A power of two. */
#define CN_INT_ABI_WINDOW 1024

/* Frame flags. */
enum {
    CN_INT_ABI_F_ENTRY = 1, /* the first frame an eval-loop call ran (a C-stack entry) */
};

struct cn_int_abi_frame {
    __u64 code;  /* code object address */
    __u32 instr; /* ≤3.10: f_lasti as stored; 3.11+: bytes from co_code_adaptive (signed) */
    __u32 flags;
};

/* Record status. */
enum {
    CN_INT_ABI_OK = 0,
    CN_INT_ABI_NO_THREAD = 1, /* no thread state for this thread (not a Python thread yet) */
    CN_INT_ABI_FAULT = 2,     /* a read failed mid-walk: frames so far */
    CN_INT_ABI_TRUNCATED = 3, /* more than CN_INT_ABI_MAX_FRAMES frames */
    CN_INT_ABI_AMBIGUOUS = 4, /* the thread has thread states in several interpreters and none
                                 is known to be its current one: no frames */
    CN_INT_ABI_STALE = 5,     /* the first eval-loop call's frames do not lead to its caller's
                                 current frame: a call caught publishing its _PyCFrame before
                                 writing its current_frame (3.11, 3.12): no frames */
};

/* Record flags. */
enum {
    CN_INT_ABI_R_MULTI = 1, /* the process had more than one interpreter at the sample */
    CN_INT_ABI_R_SUB = 2,   /* the frames are a sub-interpreter's (interp: its id) */
};

/* Time sources. */
enum {
    CN_INT_ABI_T_SAMPLE = 0, /* the perf sample's own PERF_SAMPLE_TIME (perf_sample_data.time) */
    CN_INT_ABI_T_KTIME = 1,  /* bpf_ktime_get_ns(): CLOCK_MONOTONIC, a little after the sample's */
};

struct cn_int_abi_record {
    __u64 time;  /* see time_src */
    __u64 ktime; /* bpf_ktime_get_ns() at the record */
    __u32 pid;   /* tgid, in the loader's pid namespace (as its perf samples say) */
    __u32 tid;
    __u32 cpu;
    __u16 nframes;
    __u8 status;
    __u8 time_src;
    __u64 tstate; /* the thread state found (0 none) */
    __u32 interp; /* R_SUB: the sub-interpreter's id (PyInterpreterState.id, clamped) */
    __u16 rflags; /* CN_INT_ABI_R_… */
    __u16 nsub;   /* R_SUB: frames [0, nsub) are the sub-interpreter's; the rest, the thread's
                     frames in the interpreter that called into it (its other, inactive state) */
    struct cn_int_abi_frame frames[CN_INT_ABI_MAX_FRAMES];
};

#define CN_INT_ABI_HEADER_SIZE 48 /* offsetof(struct cn_int_abi_record, frames) */

/* Counters, per CPU (map "stats"). */
enum {
    CN_INT_ABI_S_RUNS = 0,  /* samples of registered processes */
    CN_INT_ABI_S_RECORDS,   /* records written */
    CN_INT_ABI_S_RING_FULL, /* records lost: ring buffer full */
    CN_INT_ABI_S_CACHE_HIT, /* thread state from the per-thread cache */
    CN_INT_ABI_S_WALKS,     /* thread-state searches */
    CN_INT_ABI_S_OTHER,     /* samples of processes not registered */
    CN_INT_ABI_S_NEG_HIT,   /* a thread searched < 50 ms ago without a thread state */
    CN_INT_ABI_S_CHECKS,    /* code-object checks done (struct cn_int_abi_check) */
    CN_INT_ABI_S_STALE,     /* walks dropped as CN_INT_ABI_STALE */
    CN_INT_ABI_S_NSTATS,
};

#endif /* CN_INT_PYTHON_ABI_H */
