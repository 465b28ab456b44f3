// link: none
// Runs a command the way a container with an older or stricter seccomp profile does: with a
// filter that refuses process_vm_readv with EPERM (SCMP_ACT_ERRNO, as Docker before 20.10 and
// containerd before 1.7 did). Usage: no_vm_readv PROGRAM [ARGS...]. Needs no privilege
// (PR_SET_NO_NEW_PRIVS first). The filter is inherited by the program and everything it starts.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "no_vm_readv: unknown architecture"
#endif

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: no_vm_readv PROGRAM [ARGS...]\n");
        return 2;
    }
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("no_vm_readv: seccomp");
        return 2;
    }
    // The filter works: the call is refused, not run.
    if (syscall(__NR_process_vm_readv, getpid(), NULL, 0, NULL, 0, 0) != -1 || errno != EPERM) {
        fprintf(stderr, "no_vm_readv: process_vm_readv was not refused\n");
        return 2;
    }
    execvp(argv[1], argv + 1);
    perror("no_vm_readv: exec");
    return 127;
}
