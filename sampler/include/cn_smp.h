/* cn_smp.h — canopy's sampler: the whole public API of sampler/.
 *
 * The sampler captures what a process (with all its threads, present and future, and the
 * children it forks) or the whole system is doing, with perf_event sampling. Data flows:
 * the kernel writes records into one ring buffer per CPU; cn_smp_session_read() drains the
 * rings without blocking, orders the records by time, tracks every process's address space
 * (/proc/PID/maps, then MMAP2 records; exec resets it), unwinds each sample (kernel
 * frame-pointer callchain, CFI fix-up of frame-less leaves, or libunwind over the copied
 * user stack) and hands out, through callbacks, samples whose frames are LEAF FIRST
 * (object, file offset) pairs — never bare virtual addresses — plus task events (comm,
 * fork, exit). The sampler owns no tree: the caller interns frames (aggregate/).
 *
 * Ownership: a session owns its objects (struct cn_smp_object), which stay valid and
 * unchanged until cn_smp_session_free(); everything a callback receives besides objects
 * is only valid during the callback. A session is used by one thread at a time; nothing
 * here locks. Functions return 0 (or a count) on success and a negative errno on failure;
 * cn_smp_session_start(), the call whose failures need explaining (permissions, no such
 * process, event), also fills the cn_err it is given (common/). Nothing is dropped silently:
 * every lost record, throttle, malformed record and early-stopped unwind is counted.
 */
#ifndef CN_SMP_H
#define CN_SMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cn_common.h"
#include "cn_obj.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cn_smp_session cn_smp_session;

/* ---------------------------------------------------------------------------------------
 * Unwind tables shared by sessions
 *
 * What unwinding needs of an object file (its ELF headers, .eh_frame_hdr, .eh_frame,
 * .debug_frame, whether its code keeps frame pointers, and the CFI rules compiled from
 * them), read once per file and shared by every process and every session that maps it:
 * keyed by the file's identity (device, inode, size, mtime), never by its path. A file's
 * tables stay while some live process of a session maps it; once none does they wait in
 * a least-recently-used list, whose bytes are bounded (max_bytes), for the next process
 * that maps the file (a compiler run again and again). Executable code is never kept: a
 * few prologue bytes are read when a file is loaded. A cache is used by one thread at a
 * time, like the sessions that share it (canopyd's loop), and must outlive them.
 */
typedef struct cn_smp_cache cn_smp_cache;

typedef struct cn_smp_cache_stats {
    uint64_t files;      /* files whose tables are held */
    uint64_t in_use;     /* of those, mapped by a live process of a session */
    uint64_t bytes;      /* bytes held by all of them (read file parts, compiled rules) */
    uint64_t lru_bytes;  /* of those, held by files no live process maps */
    uint64_t max_bytes;  /* the bound on lru_bytes */
    uint64_t loads;      /* files read */
    uint64_t hits;       /* tables found held for a file mapped again */
    uint64_t evictions;  /* tables dropped to keep lru_bytes within max_bytes */
    uint64_t expired;    /* tables dropped by cn_smp_cache_expire */
    uint64_t open_files; /* of the files held, those kept open to read their .eh_frame as
                            lookups need it (image.c, "lazy"): one fd each */
} cn_smp_cache_stats;

/* The default bound on the tables of files no live process maps. */
#define CN_SMP_CACHE_DEFAULT_BYTES (32ULL << 20)

/* A new cache whose unused tables hold at most max_bytes (0: the default). NULL when out
 * of memory. */
cn_smp_cache *cn_smp_cache_new(uint64_t max_bytes);
/* Frees the cache; every session using it must be freed first. Accepts NULL; returns NULL. */
cn_smp_cache *cn_smp_cache_free(cn_smp_cache *c);
void cn_smp_cache_stats_get(const cn_smp_cache *c, cn_smp_cache_stats *out);
/* Drops the tables no live process has mapped for idle_ns or more at now_ns (CLOCK_MONOTONIC,
 * cn_common_now_ns): the bound keeps the unused tables few, this keeps them recent (a
 * machine that stopped building gives its compilers' tables back). Accepts NULL. Returns
 * the files dropped. */
size_t cn_smp_cache_expire(cn_smp_cache *c, int64_t now_ns, int64_t idle_ns);

/* ---------------------------------------------------------------------------------------
 * Configuration
 */

typedef enum cn_smp_target {
    CN_SMP_TARGET_PID = 0, /* config.pid and all its threads and future children */
    CN_SMP_TARGET_SYSTEM,  /* every CPU, every process (root or CAP_PERFMON); with
                              config.cgroup, only the tasks of that cgroup */
    CN_SMP_TARGET_NONE,    /* no perf events: records come from cn_smp_session_feed() */
} cn_smp_target;

/* User stack bytes copied per sample by default (dwarf and auto); chosen by measurement on
 * real programs (docs/perf-sampler.md). */
#define CN_SMP_STACK_DEFAULT 16384

typedef enum cn_smp_unwind {
    CN_SMP_UNWIND_AUTO = 0, /* the copied stack: frame-pointer steps in objects built with
                               frame pointers, CFI steps elsewhere and from the leaf; the
                               kernel's frame-pointer chain where the copy ends, and past a
                               stack switch the CFI does not follow (Go's systemstack) */
    CN_SMP_UNWIND_FP,       /* the kernel's frame-pointer callchain only */
    CN_SMP_UNWIND_DWARF,    /* libunwind over the copied user stack */
} cn_smp_unwind;

/* What a session measures (docs/cli.md, "Modes"). */
typedef enum cn_smp_mode {
    CN_SMP_MODE_CPU = 0, /* samples of the CPU event: where threads burn CPU */
    CN_SMP_MODE_OFFCPU,  /* every context switch: where threads wait, weighted by the time
                            they spent switched out (ns) */
    CN_SMP_MODE_WALL,    /* both: CPU samples weighted by their period in time (ns) plus the
                            off-CPU intervals, so a thread's samples total its wall time */
} cn_smp_mode;

/* What a thread was doing over the time a sample stands for. */
typedef enum cn_smp_state {
    CN_SMP_STATE_RUNNING = 0, /* on CPU (a CPU sample) */
    CN_SMP_STATE_BLOCKED,     /* switched out waiting (sleep, I/O, lock) */
    CN_SMP_STATE_PREEMPTED,   /* switched out while still runnable (waiting for a CPU) */
} cn_smp_state;
/* What tells one process image from another (docs/security.md): the pid's start time
 * (/proc/PID/stat field 22: a reused pid has another) and marks an exec replaces: where the
 * image's code and stack start (stat fields 26 and 28, randomized per exec) and the
 * executable's device and inode. All zero = not known. */
typedef struct cn_smp_image {
    uint64_t start_time, start_code, start_stack, exe_dev, exe_ino;
} cn_smp_image;

/* Reads pid's image from /proc now. Returns 0, or -ESRCH when there is no such process. A
 * caller that checks a process's credentials reads it before and after, and passes it in
 * cn_smp_config.image so that the sampler profiles only that image. */
int cn_smp_image_read(pid_t pid, cn_smp_image *out);
bool cn_smp_image_equal(const cn_smp_image *a, const cn_smp_image *b);

/* A caller's access rule, re-applied by cn_smp_session_start() (see may_profile below):
 * 0 when the process may be profiled, else a negative errno with err set. */
typedef int (*cn_smp_may_profile_fn)(void *arg, pid_t pid, cn_err *err);

typedef struct cn_smp_config {
    cn_smp_target target;
    pid_t pid;            /* CN_SMP_TARGET_PID: the process to sample */
    const char *cgroup;   /* CN_SMP_TARGET_SYSTEM: a cgroup v2 directory (or a v1 perf_event
                             one); NULL = every task. perf's cgroup mode: per-CPU events that
                             count only while a task of that cgroup or of a descendant runs,
                             whenever it joined (copied at _new) */
    const char *event;    /* "cycles", "cpu-clock", "task-clock", ...; NULL or "auto":
                             cycles where the kernel offers it, else cpu-clock */
    uint32_t freq;        /* samples per second per thread/CPU; 0 = 99 */
    cn_smp_unwind unwind; /* default CN_SMP_UNWIND_AUTO */
    uint32_t stack_size;  /* user stack bytes copied per sample (dwarf and auto); 0 =
                             CN_SMP_STACK_DEFAULT */
    bool no_kernel;       /* true: no kernel frames (also excludes kernel-mode samples'
                             kernel part); default false = kernel frames where permitted */
    bool enable_on_exec;  /* start counting at the target's next exec (cn_smp_spawn'ed
                             children: sampling starts at the command's first instruction) */
    uint32_t ring_pages;  /* data pages per CPU ring (power of two); 0 = default (256 for fp,
                             1024 when stacks are copied) */
    /* How copied stacks are unwound (dwarf, and auto's CFI steps). By default through
     * compiled CFI rules, with libunwind for the frames those cannot describe. */
    bool libunwind_only;   /* libunwind for every sample (for comparisons) */
    bool check_unwind;     /* tests: also unwind each compiled-CFI sample with libunwind and
                              count the disagreements (counters.unwind_mismatches) */
    cn_smp_mode mode;      /* default CN_SMP_MODE_CPU */
    uint64_t min_block_ns; /* OFFCPU/WALL: off-CPU intervals shorter than this are dropped */
    /* PID targets, for a caller that checked access before starting (canopyd): the events
     * are opened disabled; before enabling them, cn_smp_session_start() re-checks, through
     * a pidfd taken first (so every /proc read is known to describe that process), that the
     * process is still `image` (when known: no exec, no reused pid) and that may_profile
     * (when set; called during _start only) still allows it; otherwise everything is
     * closed and _start fails with -EPERM (-ESRCH if the process is gone). Threads and
     * children appearing later inherit the events; an exec that changes credentials
     * detaches them in the kernel. auto's adaptive copy reopens the events later only
     * after the same image check (not may_profile), on the target's own threads, and not
     * at all while it has child processes. */
    cn_smp_image image;
    cn_smp_may_profile_fn may_profile;
    void *may_profile_arg;
    /* Unwind tables shared with other sessions (not owned; must outlive the session), or
     * NULL: the session keeps a cache of its own. */
    cn_smp_cache *cache;
    /* true: no Python frames. By default (docs/python.md) a BPF program (interp/) runs in
     * the events' overflow handler for CPython processes, and each native frame of the eval
     * loop is replaced by the Python functions it ran (objects of kind CN_SMP_OBJ_PYTHON);
     * where the program cannot be loaded the session runs native-only and
     * cn_smp_session_python() says why. */
    bool no_python;
} cn_smp_config;

/* ---------------------------------------------------------------------------------------
 * What the sampler produces
 */

typedef enum cn_smp_obj_kind {
    CN_SMP_OBJ_USER = 0, /* a file-backed mapping (ELF executable or library, or [vdso]) */
    CN_SMP_OBJ_KERNEL,   /* [kernel]: offset is the kernel address */
    CN_SMP_OBJ_MODULE,   /* [module] (a kernel module): offset is the kernel address */
    CN_SMP_OBJ_ANON,     /* anonymous memory, not executable: offset is the absolute address */
    CN_SMP_OBJ_JIT,      /* anonymous executable memory: offset is the absolute address,
                            for a /tmp/perf-PID.map lookup with pid below */
    CN_SMP_OBJ_PYTHON,   /* a Python source file (name: its basename, path: co_filename, or
                            "[python]" when unknown): offset is a key of (pid, code object)
                            in bits 20-61 and the instruction's index in bits 0-19 (all
                            ones: none), named by cn_smp_python_frame() */
} cn_smp_obj_kind;

/* A code object. Owned by the session; valid until cn_smp_session_free(). Objects are
 * shared between processes that map the same file. */
typedef struct cn_smp_object {
    uint32_t id; /* dense, 0.. in order of creation, session-unique */
    cn_smp_obj_kind kind;
    const char *identity; /* build-id hex, else "dev:inode:mtime"; "[kernel]", "[module]",
                             "[anon:PID]", "[jit:PID]", "[vdso:PID]" */
    const char *name;     /* display name: the file's basename, "[kernel]", ... */
    const char *path;     /* file for the symbolizer (absolute; /proc/PID/root/... when the
                             process has another root; /proc/PID/map_files/... when the file
                             was deleted); NULL when there is none */
    /* USER: the file's path as the process named it (its maps entry, " (deleted)" left
     * off): what profiles show, never opened. NULL for other kinds. */
    const char *mapped_path;
    const char *build_id; /* lowercase hex, or NULL */
    const char *file_key; /* what a cache shared across users must key this object's file
                             by: identity plus "@dev:inode:size:mtime" of the file read, so
                             a build-id copied into another file never names that file;
                             equals identity for objects without a file */
    pid_t pid;            /* ANON/JIT/[vdso]: the process; else 0 */
    cn_obj_ident file;    /* the file at path as the sampler checked and read it (device,
                             inode, size, mtime; ino 0 when there is none): whoever reads
                             path later opens it with cn_obj_open() and this identity, so
                             a file put at that name since is never read (docs/security.md) */
} cn_smp_object;

typedef struct cn_smp_frame {
    const cn_smp_object *obj;
    uint64_t offset; /* file offset (USER), kernel address (KERNEL/MODULE), absolute
                        address (ANON/JIT). Return addresses are already adjusted into the
                        call instruction. */
} cn_smp_frame;

/* Why an unwind stopped before reaching the outermost frame. */
typedef enum cn_smp_stop {
    CN_SMP_STOP_NONE = 0,    /* complete */
    CN_SMP_STOP_NO_INFO,     /* no unwind info (CFI) for an address, or unmapped address */
    CN_SMP_STOP_STACK_SHORT, /* the stack copy was too small */
    CN_SMP_STOP_BAD_READ,    /* a memory read failed (outside the stack copy and files) */
    CN_SMP_STOP_MAX_DEPTH,   /* more frames than CN_SMP_MAX_FRAMES */
    CN_SMP_STOP_OTHER,       /* libunwind reported another error */
    CN_SMP_STOP__COUNT
} cn_smp_stop;

/* Why a sample's stack went to libunwind instead of compiled CFI (counters.libunwind_why;
 * docs/perf-sampler.md, "Compiled CFI: what falls back"): the first frame the compiled
 * rules could not step. */
typedef enum cn_smp_fallback {
    CN_SMP_FB_NO_MAP = 0,  /* an address in no mapped object file (JIT or anonymous code) */
    CN_SMP_FB_NO_CFI,      /* no CFI covers the address (hand-written assembly, crt) */
    CN_SMP_FB_CFA_EXPR,    /* the CFA is a DWARF expression of no known shape */
    CN_SMP_FB_CFA_REG,     /* the CFA is based on a register not known at that frame */
    CN_SMP_FB_REG_RULE,    /* the return address' or frame pointer's rule has no compiled
                              form (an expression) */
    CN_SMP_FB_REG_UNKNOWN, /* that rule names a register not known at that frame */
    CN_SMP_FB_NOT_UPWARD,  /* the caller's frame is not above the callee's */
    CN_SMP_FB_OTHER,       /* anything else (a signal frame on another stack, no rules) */
    CN_SMP_FB__COUNT
} cn_smp_fallback;

#define CN_SMP_MAX_FRAMES 256

typedef struct cn_smp_sample {
    pid_t pid, tid;
    uint32_t cpu;
    uint64_t time_ns;           /* CLOCK_MONOTONIC */
    uint64_t period;            /* events (ns for cpu-clock/task-clock) since the previous sample */
    const cn_smp_frame *frames; /* LEAF FIRST: kernel frames (if any), then user frames */
    uint32_t nframes;
    uint32_t nkernel; /* how many of the first frames are kernel frames */
    cn_smp_stop stop; /* why the user unwind stopped early, or NONE */
    /* OFFCPU and WALL: the nanoseconds this sample stands for (an off-CPU interval, or a
     * part of one, or a CPU sample's period in time); 0 in CPU mode. */
    uint64_t weight_ns;
    cn_smp_state state;
} cn_smp_sample;

typedef enum cn_smp_task_kind {
    CN_SMP_TASK_COMM = 0, /* a thread's name (at attach, prctl, or exec when exec is true) */
    CN_SMP_TASK_FORK,     /* a new thread (pid == ppid) or process */
    CN_SMP_TASK_EXIT,     /* a thread exited (the process when pid == tid) */
    CN_SMP_TASK_CGROUP,   /* the process's cgroup path (cgroup): read from /proc at its first
                             sample, again after an exec and at most every 10 s of samples,
                             reported when it changed; a child inherits its parent's */
} cn_smp_task_kind;

typedef struct cn_smp_task_event {
    cn_smp_task_kind kind;
    pid_t pid, tid;     /* the task concerned */
    pid_t ppid, ptid;   /* FORK: the parent */
    uint64_t time_ns;   /* 0 when unknown (names read from /proc at attach) */
    const char *comm;   /* COMM: the new name (valid during the callback) */
    bool exec;          /* COMM: the name changed because of an exec */
    const char *cgroup; /* CGROUP: the path (valid during the callback) */
} cn_smp_task_event;

/* Callbacks, all optional, called from inside cn_smp_session_read()/_stop()/_feed(), in
 * time order. arg is the pointer given to cn_smp_session_new(). */
typedef struct cn_smp_callbacks {
    void (*sample)(void *arg, const cn_smp_sample *sample);
    void (*task)(void *arg, const cn_smp_task_event *ev);
    /* A new object, before the first sample that uses it. */
    void (*object)(void *arg, const cn_smp_object *obj);
    /* Every raw perf record read from the rings (struct perf_event_header first, len
     * bytes, valid during the call), in time order, just before it is handled: a capture
     * that cn_smp_session_feed() can replay (bench/bench_replay.c). Not called for fed
     * records. */
    void (*record)(void *arg, const void *rec, size_t len);
} cn_smp_callbacks;

typedef struct cn_smp_counters {
    uint64_t samples;     /* SAMPLE records delivered */
    uint64_t lost;        /* records the kernel dropped (sum of LOST records' counts) */
    uint64_t lost_events; /* LOST records */
    uint64_t throttles, unthrottles;
    uint64_t bad_records;  /* malformed records (skipped, counted) */
    uint64_t unwind_early; /* samples whose user unwind stopped early (sum of by_reason) */
    uint64_t unwind_stop[CN_SMP_STOP__COUNT]; /* by reason; [NONE] counts complete unwinds */
    uint64_t leaf_fixups;       /* auto: samples where the kernel's frame-pointer chain skipped
                                   the caller of a frame-less leaf (CFI found it) */
    uint64_t dwarf_unwinds;     /* samples unwound from their stack copy (dwarf and auto) */
    uint64_t fp_frames;         /* auto: frames stepped by frame pointer, not CFI */
    uint64_t chain_joins;       /* auto: samples whose stack copy ended inside frame-pointer
                                   code, or whose walk ended at a stack switch, completed
                                   from the kernel's frame-pointer chain */
    uint64_t cfi_unwinds;       /* stack unwinds (incl. auto's leaf steps) done wholly through
                                   compiled CFI rules */
    uint64_t libunwind_unwinds; /* stack unwinds that needed libunwind */
    uint64_t libunwind_why[CN_SMP_FB__COUNT]; /* of those, by cause (dwarf and auto) */
    uint64_t unwind_checked;    /* check_unwind: compiled-CFI unwinds redone with libunwind */
    uint64_t unwind_mismatches; /* check_unwind: of those, with a different result */
    uint64_t unmapped;          /* user addresses outside every known mapping */
    /* auto's adaptive stack copy (docs/perf-sampler.md): the copy the events ask for now
     * (bytes; 0 without copies), whether it adapts (no --stack-size), how often it shrank
     * and grew back, and samples dropped as twins while old and new events overlapped.
     * stack_chain_off: 1 while the events ask for no user frame-pointer chain (the small
     * copy finishes every stack alone). */
    uint64_t stack_copy, stack_adaptive, stack_chain_off;
    uint64_t stack_shrinks, stack_grows, stack_switch_dropped;
    /* Cgroup ids looked up (each new one the samples carry, by its file handle), and
     * /proc/PID/cgroup reads (without ids, or for an id with no path found: new processes
     * and every 10 s). */
    uint64_t cgroup_lookups, cgroup_reads;
    uint64_t processes;    /* processes seen */
    uint64_t threads;      /* threads seen */
    uint64_t live_threads; /* threads not yet exited (PID target) */
    /* OFFCPU and WALL (docs/perf-sampler.md, "Off-CPU"). */
    uint64_t switches;         /* context-switch samples (a thread going off CPU) */
    uint64_t offcpu_intervals; /* intervals closed by the thread's switch back in */
    uint64_t offcpu_short;     /* of those, dropped as shorter than min_block_ns */
    uint64_t offcpu_unmatched; /* switch-ins without a switch-out, and switch-outs whose
                                  switch-in was never seen (lost records) */
    uint64_t offcpu_ns;        /* off-CPU time delivered */
    uint64_t offcpu_waiting;   /* threads already off CPU when the session began watching them
                                  (an attach; Python frames at registration): their wait
                                  counted from then, their stack read from /proc and memory */
    /* Python frames (docs/python.md, "Phase 2"). */
    uint64_t py_registered;   /* processes registered with interp/ (CPython found) */
    uint64_t py_refused;      /* registrations refused (the last reason: cn_smp_session_python) */
    uint64_t py_samples;      /* samples of registered processes */
    uint64_t py_joined;       /* of those, joined with their record and spliced */
    uint64_t py_before;       /* of those, taken before the process was registered (native) */
    uint64_t py_no_record;    /* of those, without a record (ring full) (native) */
    uint64_t py_no_frames;    /* of those, a record without frames (no thread state yet) */
    uint64_t py_mismatch;     /* joined samples whose eval frames and Python segments differ in
                                 number (every Python frame kept: docs/python.md) */
    uint64_t py_frames;       /* distinct Python frames (pid, code object, instruction) */
    uint64_t py_frames_bound; /* frames past the bound on those, kept per function */
    uint64_t py_collisions;   /* two (pid, code object) pairs on one offset hash (resalted) */
    uint64_t py_replaced;     /* frames whose code object was freed and its address reused by
                                 another (named anew) */
    uint64_t py_errors;       /* Python frames lost to allocation failures */
    uint64_t py_subinterp;    /* joined samples of a thread in a sub-interpreter (its frames,
                                 under a "[python: sub-interpreter N]" frame) */
    uint64_t py_ambiguous;    /* samples of a thread whose interpreter could not be told
                                 ("[python: sub-interpreter ?]" in place of its frames) */
} cn_smp_counters;

/* ---------------------------------------------------------------------------------------
 * Sessions
 */

/* A new session for cfg (copied; event string too). Nothing is opened yet. cb may be NULL.
 * Returns 0 and *ret (free with cn_smp_session_free) or -EINVAL / -ENOMEM. */
int cn_smp_session_new(const cn_smp_config *cfg, const cn_smp_callbacks *cb, void *arg,
                       cn_smp_session **ret);

/* Opens the perf events (one ring per CPU; for a PID target, per-thread inherited events
 * for every thread, re-listing /proc/PID/task until stable), reads the starting address
 * spaces, and enables sampling. Errors: -ESRCH (no such process), -EACCES/-EPERM (not
 * permitted), -ENOENT (no such event), -EINVAL (already started), others from
 * perf_event_open; each with a one-line message in err (which may be NULL). */
int cn_smp_session_start(cn_smp_session *s, cn_err *err);

/* The ring fds to poll for POLLIN (one per online CPU; POLLHUP when everything is gone).
 * Returns the count and sets *fds to an array owned by the session. 0 before start. */
size_t cn_smp_session_fds(const cn_smp_session *s, const int **fds);

/* Reads what the rings hold, never blocking, and delivers in time order every record
 * older than 5 ms before this call; newer ones may still be overtaken by a record being
 * written on another CPU and wait for a later call (or _stop), so that records from
 * different CPUs come out ordered (a sample is unwound with the mappings in force at its
 * time). Returns the number of samples delivered (>= 0) or a negative errno (-ENOMEM). */
int cn_smp_session_read(cn_smp_session *s);

/* OFFCPU and WALL: delivers, for every thread switched out now, the time it has spent
 * switched out up to now_ns (CLOCK_MONOTONIC) that was not delivered yet, as samples at the
 * stack where it went off CPU (so a live tree shows the waits in progress). The rest of
 * the interval comes with the thread's switch-in. _read does this itself, up to the time
 * before which every record was delivered; tests and replays call it. Returns the samples
 * delivered (>= 0) or -EINVAL. */
int cn_smp_session_pending(cn_smp_session *s, uint64_t now_ns);

/* Blocking helper for simple tools: polls the rings for up to timeout_ms (-1 = forever,
 * until data arrives or the session ends), then reads. Returns like _read. */
int cn_smp_session_wait(cn_smp_session *s, int timeout_ms);

/* True once a PID target has no live thread left (every tracked task exited). Read
 * again, or _stop(), to deliver what remains. Always false for SYSTEM. */
bool cn_smp_session_ended(const cn_smp_session *s);

/* Disables the events, delivers every record still held, and closes the fds. The session
 * keeps its objects and counters. Idempotent. */
int cn_smp_session_stop(cn_smp_session *s);

/* Frees the session and its objects; accepts NULL; returns NULL. */
cn_smp_session *cn_smp_session_free(cn_smp_session *s);

/* The event actually used ("cpu-clock", "cycles", ...), valid after a successful start. */
const char *cn_smp_session_event(const cn_smp_session *s);
/* The unwind mode actually used. */
cn_smp_unwind cn_smp_session_unwind(const cn_smp_session *s);
/* Whether kernel frames are being collected (false with no_kernel or when not permitted). */
bool cn_smp_session_kernel(const cn_smp_session *s);
/* Python frames: "on", or "off (why)" (no_python, the BPF program not loaded, or every
 * CPython process refused: the last reason). Valid until the session is freed. */
const char *cn_smp_session_python(const cn_smp_session *s);
/* A Python frame's names (a frame of an object of kind CN_SMP_OBJ_PYTHON): qualname (or
 * "[python: unreadable]"), file, the instruction's line and the function's first line (0
 * unknown). Strings valid until the session is freed. 0, or -ENOENT for another frame. */
typedef struct cn_smp_python_info {
    const char *name, *file;
    int line, first_line;
} cn_smp_python_info;
int cn_smp_python_frame(const cn_smp_session *s, const cn_smp_object *obj, uint64_t offset,
                        cn_smp_python_info *out);
void cn_smp_session_counters(const cn_smp_session *s, cn_smp_counters *out);

/* Feeds raw perf records (a byte stream of struct perf_event_header-framed records, in the
 * layout this session's start would request: see cn_smp_session_sample_type()) as if read
 * from a ring, and delivers them (no holding back). Malformed records are counted and
 * skipped; never crashes on any input. For tests, fuzzing and replays. Returns the number
 * of samples delivered or negative errno. */
int cn_smp_session_feed(cn_smp_session *s, const void *buf, size_t len);
/* The perf sample_type bits (PERF_SAMPLE_*) this session uses. */
uint64_t cn_smp_session_sample_type(const cn_smp_session *s);
/* Where a SAMPLE record as the record tap hands it (cn_smp_callbacks.record) keeps its user
 * stack copy, found by this session's own record parser: *size_at = the offset of the
 * copy's size field (the copy follows it, then the u64 of bytes the kernel filled), *size =
 * the copy's size, *dyn = the bytes filled. For a capture that cuts copies to what was
 * filled (bench/bench_replay.c). 0, -ENOENT for a record of another type or without a copy,
 * or -EINVAL for one that does not parse. */
int cn_smp_session_record_stack(const cn_smp_session *s, const void *rec, size_t len,
                                size_t *size_at, uint64_t *size, uint64_t *dyn);
/* Makes a CN_SMP_TARGET_NONE session replay a capture (records taken with
 * cn_smp_callbacks.record, bench/bench_replay.c): records fed from now on are in
 * sample_type's layout, a superset of the session's own by PERF_SAMPLE_CALLCHAIN,
 * _REGS_USER (this architecture's register set), _STACK_USER and _CGROUP (read, unused:
 * a replay has no cgroups), so that one capture (e.g.
 * auto's: chain, registers and stack) replays into sessions of every unwind mode, each
 * using only what its mode uses; and the files that MMAP records name are opened, as in a
 * live session (same device and inode), for their unwind tables. Only for captures of this
 * machine: a plain feed-only session never opens files. Returns 0, or -EINVAL (not a
 * feed-only session, or not such a superset). */
int cn_smp_session_replay(cn_smp_session *s, uint64_t sample_type);

/* Names: "fp", "dwarf", "auto"; parse returns -EINVAL on anything else. */
const char *cn_smp_unwind_name(cn_smp_unwind u);
int cn_smp_unwind_parse(const char *name, cn_smp_unwind *ret);
const char *cn_smp_stop_name(cn_smp_stop stop);
/* "no-map", "no-cfi", "cfa-expr", "cfa-reg", "reg-rule", "reg-unknown", "not-upward",
 * "other". */
const char *cn_smp_fallback_name(cn_smp_fallback fb);
/* Modes: "cpu", "off-cpu", "wall"; parse returns -EINVAL on anything else. */
const char *cn_smp_mode_name(cn_smp_mode m);
int cn_smp_mode_parse(const char *name, cn_smp_mode *ret);
/* States: "running", "blocked", "preempted". */
const char *cn_smp_state_name(cn_smp_state st);

/* ---------------------------------------------------------------------------------------
 * Starting a command held before its first instruction (for `canopy run`)
 */

typedef struct cn_smp_child {
    pid_t pid;
    int release_fd; /* write end of the pipe the child blocks on; -1 once released */
} cn_smp_child;

/* Forks a child that, as uid/gid (when uid != (uid_t)-1 it drops to them, and to gid's
 * supplementary groups of none), blocks before execvp(argv[0], argv) until
 * cn_smp_child_release(). The child keeps stdin/stdout/stderr. Returns 0 and *ret, or a
 * negative errno. If the exec fails, the child exits with status 127. Attach a session
 * with target pid = child.pid and enable_on_exec = true, start it, then release. */
int cn_smp_spawn(char *const argv[], uid_t uid, gid_t gid, cn_smp_child *ret);
/* Lets the child exec. Idempotent. Returns 0 or negative errno. */
int cn_smp_child_release(cn_smp_child *c);
/* Kills (SIGKILL) and reaps a child that was never released (error paths). */
void cn_smp_child_abort(cn_smp_child *c);

#ifdef __cplusplus
}
#endif

#endif /* CN_SMP_H */
