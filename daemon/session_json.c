/* session_json.c — a session's description in canopyd's replies: the entries of
 * `sessions` and the "session" of attach, run, system and stop (docs/protocol.md;
 * `canopy sessions --format json`).
 *
 * Built from live/'s plain view of a session (cn_live_session_info), so live/ has no
 * protocol JSON of its own; the one JSON live/ keeps is the session spec's codec (opts.c),
 * which the CLI and canopyd share.
 */
#include <string.h>

#include "d_internal.h"

json_t *cn_d_session_json(const cn_live_session *s)
{
    cn_live_session_info i;
    cn_live_session_info_get(s, &i);
    /* Strings a target or a user chose (the comm, cut by the kernel at 15 bytes, maybe
     * inside a character; the name; a saved file's event) go through the protocol's UTF-8
     * rule (cn_proto_str), so the entry is never missing from a reply; NULL only on
     * ENOMEM ("o" consumes them, "o?" takes NULL as null). */
    json_t *target = i.kind == CN_LIVE_SYSTEM
                         ? json_string("system")
                         : json_pack("{s:i, s:o}", "pid", (int)i.pid, "comm", cn_proto_str(i.comm));
    json_t *o = json_pack(
        "{s:o, s:o?, s:s, s:o, s:s, s:o, s:i, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:I, "
        "s:f, s:I}",
        "id", cn_proto_str(i.id), "name", i.name ? cn_proto_str(i.name) : NULL, "kind",
        cn_live_kind_name(i.kind), "target", target, "state", cn_live_state_name(i.state), "event",
        cn_proto_str(i.event), "freq", (int)i.freq, "unwind", cn_proto_str(i.unwind), "samples",
        (json_int_t)i.samples, "lost", (json_int_t)i.lost, "dropped", (json_int_t)i.dropped,
        "threads", (json_int_t)i.threads, "unsymbolized", (json_int_t)i.unsymbolized, "memory",
        (json_int_t)i.memory, "memory_limited", i.memory_limited, "started",
        (json_int_t)i.started_unix, "duration_s", (double)i.duration_ns / 1e9, "owner",
        (json_int_t)i.owner);
    if (o &&
        (json_object_set_new(o, "compactions", json_integer((json_int_t)i.compactions)) < 0 ||
         json_object_set_new(
             o, "trim",
             json_pack("{s:I, s:f, s:f, s:I, s:b, s:I, s:I, s:I, s:I}", "trims",
                       (json_int_t)i.trims, "weight", i.trimmed_weight, "share", i.trim_share,
                       "raised", (json_int_t)i.trim_raises, "refusing", i.refusing, "exited_rows",
                       (json_int_t)i.exited_rows, "frames_removed", (json_int_t)i.frames_removed,
                       "funcs_removed", (json_int_t)i.funcs_removed, "strings_removed",
                       (json_int_t)i.strings_removed)) < 0)) {
        json_decref(o);
        o = NULL;
    }
    /* docs/cli-live.md, "Session counters" */
    json_t *more = json_pack(
        "{s:I, s:{s:I, s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I, s:I}, s:I}",
        "user_stacks", (json_int_t)i.user_stacks, "unwind_outcomes", "complete",
        (json_int_t)i.unwind_outcomes.complete, "truncated_stack",
        (json_int_t)i.unwind_outcomes.truncated_stack, "no_cfi",
        (json_int_t)i.unwind_outcomes.no_cfi, "read_fault",
        (json_int_t)i.unwind_outcomes.read_fault, "other", (json_int_t)i.unwind_outcomes.other,
        "unwinder", "dwarf", (json_int_t)i.dwarf_unwinds, "cfi", (json_int_t)i.cfi_unwinds,
        "libunwind", (json_int_t)i.libunwind_unwinds, "unmapped", (json_int_t)i.unmapped, "symbols",
        "pending", (json_int_t)i.sym_pending, "unresolved", (json_int_t)i.unresolved,
        "unresolvable", (json_int_t)i.unresolvable, "by_range", (json_int_t)i.sym_by_range,
        "errors", (json_int_t)i.errors);
    if (more && i.stack_copy &&
        json_object_set_new(
            more, "stack_copy",
            json_pack("{s:I, s:b, s:b, s:I, s:I}", "bytes", (json_int_t)i.stack_copy, "adaptive",
                      i.stack_adaptive, "user_chain", !i.stack_chain_off, "shrinks",
                      (json_int_t)i.stack_shrinks, "grows", (json_int_t)i.stack_grows)) < 0) {
        json_decref(more);
        more = NULL;
    }
    /* Stacks that went to libunwind, by cause (docs/cli-live.md, "Session counters"). */
    json_t *why = json_object();
    for (int k = 0; why && k < CN_SMP_FB__COUNT; k++)
        if (i.libunwind_why[k] &&
            json_object_set_new(why, cn_smp_fallback_name((cn_smp_fallback)k),
                                json_integer((json_int_t)i.libunwind_why[k])) < 0) {
            json_decref(why);
            why = NULL;
        }
    json_t *unw = more ? json_object_get(more, "unwinder") : NULL;
    if (!why || !unw) {
        json_decref(why);
        why = NULL;
    }
    /* json_object_set_new() consumes why, also when it fails */
    if (!why || json_object_set_new(unw, "libunwind_causes", why) < 0) {
        json_decref(more);
        more = NULL;
    }
    if (more && json_object_set_new(more, "cgroups",
                                    json_pack("{s:I, s:I}", "lookups", (json_int_t)i.cgroup_lookups,
                                              "reads", (json_int_t)i.cgroup_reads)) < 0) {
        json_decref(more);
        more = NULL;
    }
    /* Records by cause (docs/cli-live.md, "Session counters"): never silent. */
    if (more && json_object_set_new(
                    more, "records",
                    json_pack("{s:I, s:I, s:I, s:I, s:I}", "lost", (json_int_t)i.lost,
                              "lost_events", (json_int_t)i.lost_events, "throttles",
                              (json_int_t)i.throttles, "malformed", (json_int_t)i.bad_records,
                              "twins_dropped", (json_int_t)i.twins_dropped)) < 0) {
        json_decref(more);
        more = NULL;
    }
    if (o && json_object_set_new(o, "mode", cn_proto_str(i.mode)) < 0) {
        json_decref(o);
        o = NULL;
    }
    /* The sampler's off-CPU counters: a saved session has no sampler, a CPU one none. */
    if (o && i.state != CN_LIVE_SAVED && strcmp(i.mode, cn_smp_mode_name(CN_SMP_MODE_CPU)) &&
        json_object_set_new(o, "offcpu",
                            json_pack("{s:I, s:I, s:I, s:I}", "switches", (json_int_t)i.switches,
                                      "unmatched", (json_int_t)i.offcpu_unmatched, "short",
                                      (json_int_t)i.offcpu_short, "waiting",
                                      (json_int_t)i.offcpu_waiting)) < 0) {
        json_decref(o);
        o = NULL;
    }
    /* Python frames (docs/python.md): a saved session has no sampler. */
    if (o && i.python &&
        json_object_set_new(
            o, "python",
            json_pack("{s:o, s:I, s:I, s:I, s:I, s:I, s:I}", "state", cn_proto_str(i.python),
                      "registered", (json_int_t)i.py_registered, "refused",
                      (json_int_t)i.py_refused, "samples", (json_int_t)i.py_samples, "joined",
                      (json_int_t)i.py_joined, "no_record", (json_int_t)i.py_no_record, "mismatch",
                      (json_int_t)i.py_mismatch)) < 0) {
        json_decref(o);
        o = NULL;
    }
    if (!o || !more) {
        json_decref(o);
        json_decref(more);
        return NULL;
    }
    if (json_object_update_new(o, more) < 0) { /* takes more either way */
        json_decref(o);
        return NULL;
    }
    /* A cgroup session (docs/cli-live.md "Containers"): the directory, and the container
     * or unit its path names; "target" stays "system" for older clients. */
    if (i.cgroup) {
        cn_cgroup_info ci;
        cn_cgroup_identify(i.cgroup, &ci);
        if (json_object_set_new(o, "cgroup", cn_proto_str(i.cgroup)) < 0 ||
            (ci.container_id[0] &&
             json_object_set_new(o, "container", json_string(ci.container_id)) < 0) ||
            (ci.pod_uid[0] && json_object_set_new(o, "pod_uid", json_string(ci.pod_uid)) < 0) ||
            (ci.systemd_unit[0] &&
             json_object_set_new(o, "systemd_unit", cn_proto_str(ci.systemd_unit)) < 0)) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}
