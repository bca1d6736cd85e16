/* Processes seen from any PID namespace: identity and liveness (lib/core/base/proc.c).
 *
 * A pid means something only in a PID namespace. A process of a job may live in another one
 * than whoever checks on it (`vgpu run -- unshare -pf --mount-proc PROG`: PROG is pid 1 in its
 * own namespace and sees only that namespace's /proc). So a process is recorded with the pid it
 * sees for itself, the inode of its PID namespace and its start time, and, when known, its pid in
 * one more namespace (the "host" one: for a job, the namespace of `vgpu run`). A checker judges
 * liveness in the process's namespace, and answers "unknown" when it cannot see it: the caller
 * must then keep whatever the process holds (never drop the usage of a live process).
 *
 * libc only (linked into libvgpu.so); never prints, never exits. */
#ifndef VGPU_PROC_H
#define VGPU_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Start time of a process (/proc/PID/stat field 22), 0 when it does not exist. */
uint64_t vgpu_proc_start_time(pid_t pid);
/* A pidfd for pid (pidfd_open(2), Linux 5.3+): readable once the process has ended. -1 with
 * errno where the kernel has none (ENOSYS) or refuses it (EPERM under some seccomp filters). */
int vgpu_proc_pidfd(pid_t pid);
/* First NSpid entry of /proc/self/status (the calling process's pid in the outermost pid
 * namespace visible to its /proc); getpid() when unavailable. */
pid_t vgpu_proc_host_pid(void);

/* Inode of a process's PID namespace (readlink /proc/PID/ns/pid, "pid:[INODE]"); pid 0 means
 * the caller. 0 when it cannot be read (the process is gone, or another user's). */
uint32_t vgpu_proc_pidns(pid_t pid);
/* The PID namespace whose pids the caller's /proc shows: its own namespace, or, when /proc was
 * mounted by an ancestor namespace (NSpid has several entries), that one (0 when unreadable).
 * Pids the caller reads from /proc or passes to kill(2) are in this namespace. Cached. */
uint32_t vgpu_proc_view_ns(void);

/* How a process was recorded. */
struct vgpu_proc_id {
    pid_t pid;                /* its own getpid() */
    uint32_t pidns;           /* inode of its PID namespace; 0 = unknown (taken as the checker's) */
    uint64_t start;           /* /proc/PID/stat field 22; 0 = could not be read */
    pid_t host_pid;           /* its pid in namespace host_ns; 0 = unknown */
    uint32_t host_ns;
};

/* The caller's identity (host_pid/host_ns: its pid in its /proc's namespace, when that is an
 * ancestor namespace, else its own pid and namespace). */
void vgpu_proc_self(struct vgpu_proc_id *id);

enum vgpu_liveness {
    VGPU_PROC_DEAD = 0,       /* proven: the pid is gone in its namespace, or reused (start time differs) */
    VGPU_PROC_ALIVE = 1,      /* the same process (pid and start time) exists */
    VGPU_PROC_UNKNOWN = 2,    /* cannot tell (namespace not visible, /proc unreadable, start time unknown): keep it */
};

/* Judges id from the caller's view (vgpu_proc_view_ns):
 *  - id in the caller's namespace (or pidns 0): /proc/PID/stat: gone -> DEAD; start time equal ->
 *    ALIVE, different -> DEAD; unreadable, or start unknown -> UNKNOWN.
 *  - else, id->host_pid in the caller's namespace (host_ns == view) and that process matches
 *    -> ALIVE. Else one walk of /proc for processes of namespace id->pidns (readlink ns/pid) whose
 *    last NSpid entry is id->pid: found with that start time -> ALIVE; not found while the walk
 *    saw that namespace (or id->host_ns is the caller's view, so the namespace was visible once
 *    and is now empty), and every /proc entry was readable -> DEAD; otherwise UNKNOWN.
 * *view_pid (may be NULL) gets the process's pid in the caller's view when ALIVE (else 0).
 * Costs one read of /proc/PID/stat, or, for a process of another namespace not yet resolved, one
 * readlink per process on the machine. Thread-safe. */
enum vgpu_liveness vgpu_proc_liveness(const struct vgpu_proc_id *id, pid_t *view_pid);

/* Parent pid of a process in the caller's view (/proc/PID/stat field 4); 0 when unknown. */
pid_t vgpu_proc_ppid(pid_t pid);
/* True when pid is one of roots[] or descends from one (PPid chain, at most 64 steps). */
bool vgpu_proc_descends(pid_t pid, const pid_t *roots, unsigned nroots);

#endif
