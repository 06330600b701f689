/* The plain baseline of tests/bench/socket_udp.sh: the least a receiver can
 * do on a kernel UDP socket. recvmmsg, 64 datagrams per call, no GRO, a
 * blocking socket, one buffer per datagram; it counts what it reads and
 * prints the count once traffic stopped for IDLE_SECONDS.
 *
 * usage: recvmmsg_loop IP PORT IDLE_SECONDS */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>

#define BATCH 64
#define BUF 9000

static char bufs[BATCH][BUF];

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s IP PORT IDLE_SECONDS\n", argv[0]);
        return 2;
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    int rcvbuf = 64 << 20;
    /* The same 64 MiB receive buffer the other receivers get. */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
    inet_pton(AF_INET, argv[1], &addr.sin_addr);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        perror("bind");
        return 1;
    }
    struct timeval idle = {.tv_sec = atoi(argv[3])};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof idle);
    struct iovec iov[BATCH];
    struct mmsghdr msgs[BATCH];
    for (int i = 0; i < BATCH; i++) {
        iov[i] = (struct iovec){.iov_base = bufs[i], .iov_len = BUF};
        msgs[i] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[i], .msg_iovlen = 1}};
    }
    unsigned long long packets = 0, bytes = 0;
    for (;;) {
        int n = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
        if (n < 0) {
            if (packets > 0) break; /* idle after traffic: done */
            continue;               /* still waiting for the first datagram */
        }
        packets += n;
        for (int i = 0; i < n; i++) bytes += msgs[i].msg_len;
    }
    printf("%llu %llu\n", packets, bytes);
    return 0;
}
