// link: driver
// A program that takes the descriptors of the shim's metrics server for its own, as programs
// that close what they did not open (close_range) and reuse the numbers do. Arguments: PORT
// (the GPULEAK_METRICS port) and a mode; one allocation first starts the shim's server.
//   listener     finds the shim's listening socket on PORT, closes it and puts a listening
//                socket of its own (on a free port) at the same descriptor number; connects
//                to it three times, sending "hello\n" on each, waits 500 ms, then accepts
//                (waiting at most 3 s for each). Prints "found <fd>", "accepted K" (its
//                own accept's connections), "hello K" (how many of them carried its hello)
//                and "listener open yes|no" (its socket still open at the end)
//   connection   prints "ready", waits for a line on stdin (the test has connected to PORT
//                and sent part of a request), finds the shim's connection on PORT, closes it
//                and puts one end of a socket pair of its own at that number, with a whole
//                HTTP request waiting on it; prints "found <fd>", then after 3 s "kept
//                yes|no" (its end still open), "request unread yes|no" (the request still
//                there for it to read) and "reply none|<first line>" (what came back on the
//                other end)
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
#include "simcuda.h"

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* The descriptor of a TCP socket whose local port is PORT: listening (want_listener) or
 * connected; -1 if none. */
static int find_socket(int port, int want_listener) {
    for (int fd = 3; fd < 1024; fd++) {
        struct sockaddr_in sa;
        socklen_t len = sizeof sa;
        if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0 || sa.sin_family != AF_INET) continue;
        if (ntohs(sa.sin_port) != port) continue;
        int listening = 0;
        socklen_t ol = sizeof listening;
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ol) != 0) continue;
        if (!!listening == !!want_listener) return fd;
    }
    return -1;
}

static int listener_mode(int port) {
    int fd = find_socket(port, 1);
    printf("found %d\n", fd);
    fflush(stdout);
    if (fd < 0) return 1;
    close(fd);
    int own = socket(AF_INET, SOCK_STREAM, 0);
    if (own < 0) return 6;
    if (own != fd) {
        if (dup2(own, fd) != fd) return 6;
        close(own);
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 16) ||
        getsockname(fd, (struct sockaddr *)&sa, &len))
        return 6;
    int clients[3];
    for (int i = 0; i < 3; i++) {
        clients[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (clients[i] < 0 || connect(clients[i], (struct sockaddr *)&sa, sizeof sa)) return 6;
        if (write(clients[i], "hello\n", 6) != 6) return 6;
    }
    sleep_ms(500);
    int accepted = 0, hellos = 0;
    for (int i = 0; i < 3; i++) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 3000) != 1) break;
        int c = accept(fd, NULL, NULL);
        if (c < 0) break;
        accepted++;
        char buf[16] = {0};
        struct pollfd q = {c, POLLIN, 0};
        if (poll(&q, 1, 1000) == 1 && read(c, buf, sizeof buf - 1) == 6 && strcmp(buf, "hello\n") == 0) hellos++;
        close(c);
    }
    printf("accepted %d\nhello %d\n", accepted, hellos);
    printf("listener open %s\n", fcntl(fd, F_GETFD) == -1 && errno == EBADF ? "no" : "yes");
    return 0;
}

static int connection_mode(int port) {
    printf("ready\n");
    fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof line, stdin)) return 5;
    int fd = find_socket(port, 0);
    printf("found %d\n", fd);
    fflush(stdout);
    if (fd < 0) return 1;
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair)) return 6;
    close(fd);
    if (dup2(pair[0], fd) != fd) return 6;
    close(pair[0]);
    static const char request[] = "GET /metrics HTTP/1.0\r\n\r\n";
    if (write(pair[1], request, sizeof request - 1) != (ssize_t)(sizeof request - 1)) return 6;
    sleep_ms(3000); /* past the 2 s read timeout the shim once had */
    int kept = !(fcntl(fd, F_GETFD) == -1 && errno == EBADF);
    printf("kept %s\n", kept ? "yes" : "no");
    char buf[256] = {0};
    int unread = kept && recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT) == (ssize_t)(sizeof request - 1);
    printf("request unread %s\n", unread ? "yes" : "no");
    memset(buf, 0, sizeof buf);
    ssize_t n = recv(pair[1], buf, sizeof buf - 1, MSG_DONTWAIT);
    if (n > 0) {
        buf[strcspn(buf, "\r\n")] = 0;
        printf("reply %s\n", buf);
    } else {
        printf("reply none\n");
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int port = atoi(argv[1]);
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return 3;
    CUdeviceptr d;
    if (cuMemAlloc_v2(&d, 4096)) return 4;
    sleep_ms(200); /* the shim's thread is serving */
    if (strcmp(argv[2], "listener") == 0) return listener_mode(port);
    if (strcmp(argv[2], "connection") == 0) return connection_mode(port);
    return 2;
}
