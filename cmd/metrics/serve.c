/* 'vgpu metrics --listen': one thread, one poll() loop, many clients at once.
 *
 * Each connection gets one deadline for its whole request and answer (REQUEST_MS from accept).
 * Served one at a time with a timeout per read, a client that sent a byte every few seconds held
 * every other scrape for as long as it liked (14.5 s was measured, past Prometheus' 10 s scrape
 * timeout). Here a slow or stuck client only ever waits on itself, and is dropped at its deadline;
 * the others are read and answered meanwhile. */
#include "metrics/serve.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/exitcode.h"

/* A scrape's request is one short header: a client that has not sent it and read the answer in
 * this long is not a scraper worth waiting for. */
#define REQUEST_MS 1000
/* At most this many connections at once; more wait in the listen backlog (a deadline frees a
 * slot within REQUEST_MS). */
#define MAX_CLIENTS 64

struct client {
    int fd;                 /* -1: a free slot */
    long long deadline_ms;
    char req[4096];
    size_t got;
    char *out;              /* the answer, once the request is complete */
    size_t out_len, out_done;
};

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void drop(struct client *c, unsigned *n)
{
    close(c->fd);
    free(c->out);
    c->fd = -1;
    c->out = NULL;
    (*n)--;
}

/* The whole answer (headers and body) to the request in c->req, into c->out. */
static void answer(struct client *c, vgpu_metrics_body_fn body)
{
    static const char nf[] = "HTTP/1.0 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 22\r\n"
                             "Connection: close\r\n\r\nthe metrics: /metrics\n";
    char hdr[256];
    const char *text = nf + sizeof nf - 1;
    size_t text_len = 0;
    char *made = NULL, msg[600];
    int hl;
    if (strncmp(c->req, "GET /metrics ", 13) == 0 || strncmp(c->req, "GET / ", 6) == 0) {
        struct vgpu_err e = { 0 };
        made = body(&text_len, &e);
        if (made) {
            text = made;
            hl = snprintf(hdr, sizeof hdr, "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4; "
                          "charset=utf-8\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", text_len);
        } else {
            int ml = snprintf(msg, sizeof msg, "vgpu metrics: %s\n", e.msg);
            text = msg;
            text_len = (size_t)ml;
            hl = snprintf(hdr, sizeof hdr, "HTTP/1.0 500 Internal Server Error\r\nContent-Type: text/plain\r\n"
                          "Content-Length: %d\r\nConnection: close\r\n\r\n", ml);
        }
    } else {
        hl = snprintf(hdr, sizeof hdr, "%s", nf);
    }
    c->out = malloc((size_t)hl + text_len);
    if (c->out) {
        memcpy(c->out, hdr, (size_t)hl);
        memcpy(c->out + hl, text, text_len);
        c->out_len = (size_t)hl + text_len;
    }
    c->out_done = 0;
    free(made);
}

/* Reads what the client sent; the answer is made once its header is complete. false: drop it. */
static bool on_readable(struct client *c, vgpu_metrics_body_fn body)
{
    ssize_t r = recv(c->fd, c->req + c->got, sizeof c->req - 1 - c->got, MSG_DONTWAIT);
    if (r < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c->got += (size_t)r;
    c->req[c->got] = '\0';
    bool complete = r == 0 || c->got == sizeof c->req - 1 || strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n");
    if (!complete)
        return true;
    if (c->got == 0)
        return false;          /* closed without asking anything */
    answer(c, body);
    return c->out != NULL;
}

/* Sends what the socket takes now. false: done or failed, drop it. */
static bool on_writable(struct client *c)
{
    ssize_t w = send(c->fd, c->out + c->out_done, c->out_len - c->out_done, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c->out_done += (size_t)w;
    return c->out_done < c->out_len;
}

int vgpu_metrics_serve(int lfd, const char *addr, vgpu_metrics_body_fn body)
{
    static struct client cl[MAX_CLIENTS];
    struct pollfd pf[MAX_CLIENTS + 1];
    unsigned n = 0;
    long long accept_again_ms = 0;      /* out of descriptors: try accept again from then */
    for (unsigned i = 0; i < MAX_CLIENTS; i++)
        cl[i].fd = -1;
    /* accept() until EAGAIN takes every waiting connection, and must not block on the last. */
    int fl = fcntl(lfd, F_GETFL);
    if (fl < 0 || fcntl(lfd, F_SETFL, fl | O_NONBLOCK) < 0)
        return vgpu_fail(VGPU_EXIT_FAIL, "--listen %s: %s", addr, strerror(errno));
    for (;;) {
        long long now = now_ms(), wait_ms = -1;
        bool accepting = n < MAX_CLIENTS && now >= accept_again_ms;
        pf[0] = (struct pollfd){ .fd = accepting ? lfd : -1, .events = POLLIN };
        if (!accepting && n < MAX_CLIENTS)
            wait_ms = accept_again_ms - now;
        for (unsigned i = 0; i < MAX_CLIENTS; i++) {
            pf[i + 1] = (struct pollfd){ .fd = cl[i].fd, .events = cl[i].out ? POLLOUT : POLLIN };
            if (cl[i].fd >= 0) {
                long long left = cl[i].deadline_ms - now;
                if (left < 0)
                    left = 0;
                if (wait_ms < 0 || left < wait_ms)
                    wait_ms = left;
            }
        }
        if (poll(pf, MAX_CLIENTS + 1, wait_ms > INT_MAX ? INT_MAX : (int)wait_ms) < 0 && errno != EINTR)
            return vgpu_fail(VGPU_EXIT_FAIL, "--listen %s: poll: %s", addr, strerror(errno));
        now = now_ms();
        for (unsigned i = 0; i < MAX_CLIENTS; i++) {
            struct client *c = &cl[i];
            if (c->fd < 0)
                continue;
            bool keep = now < c->deadline_ms;
            short ev = pf[i + 1].revents;
            if (keep && !c->out && (ev & (POLLIN | POLLHUP | POLLERR))) {
                keep = on_readable(c, body);
                if (keep && c->out)
                    keep = on_writable(c);  /* just answered: most answers fit the socket at once */
            } else if (keep && c->out && (ev & (POLLOUT | POLLHUP | POLLERR))) {
                keep = on_writable(c);
            }
            if (!keep)
                drop(c, &n);
        }
        while (accepting && (pf[0].revents & POLLIN) && n < MAX_CLIENTS) {
            int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd < 0) {
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                    accept_again_ms = now + 100;
                else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED &&
                         errno != EPROTO)
                    return vgpu_fail(VGPU_EXIT_FAIL, "--listen %s: accept: %s", addr, strerror(errno));
                break;
            }
            unsigned i = 0;
            while (cl[i].fd >= 0)
                i++;
            cl[i] = (struct client){ .fd = fd, .deadline_ms = now + REQUEST_MS };
            n++;
        }
    }
}
