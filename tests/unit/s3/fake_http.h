/*
 * A hostile HTTP/1.1 server for the S3 backend's tests and fuzzers: one
 * thread on 127.0.0.1 (an ephemeral port) that reads requests on any number
 * of connections and answers each with whatever bytes a handler returns:
 * well-formed S3 answers, folded headers, broken status lines, truncated or
 * oversized headers and bodies, or nothing at all (a stalled gateway). It
 * records every request line, so a test can check what the client asked.
 *
 * Header-only (tests and fuzzers include it); no Ceph needed.
 */
#ifndef HC_FAKE_HTTP_H
#define HC_FAKE_HTTP_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

enum fh_action {
	FH_KEEP,  /* send the reply, keep the connection */
	FH_CLOSE, /* send the reply, then close */
	FH_STALL, /* send nothing, never answer on this connection */
};

struct fh_reply {
	char *data; /* malloc'ed; the server frees it */
	size_t len;
	enum fh_action action;
};

/* Called on the server thread for each whole request (headers read, body
 * read and discarded). Fill out; no reply data means an empty 500. */
typedef void (*fh_handler)(void *arg, const char *method, const char *target, struct fh_reply *out);

#define FH_MAX_CONNS 128
#define FH_MAX_LOG 4096
#define FH_HDR_MAX (256 * 1024)

struct fh_conn {
	int fd;
	char *buf;
	size_t len;
	bool stalled;
	bool in_body;
	unsigned long long body_left;
	char method[16];
	char target[2048];
};

struct fh_server {
	int lfd;
	int port;
	pthread_t thread;
	atomic_bool stop;
	fh_handler handler;
	void *arg;
	pthread_mutex_t lock;
	char *log[FH_MAX_LOG]; /* "METHOD target" */
	unsigned nlog;
	atomic_uint requests;
	struct fh_conn conns[FH_MAX_CONNS];
	unsigned nconns;
};

static inline void fh_reply_raw(struct fh_reply *out, const void *data, size_t len,
				enum fh_action action)
{
	out->data = malloc(len ? len : 1);
	if (out->data)
		memcpy(out->data, data, len);
	out->len = out->data ? len : 0;
	out->action = action;
}

static inline void fh_reply_fmt(struct fh_reply *out, enum fh_action action, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static inline void fh_reply_fmt(struct fh_reply *out, enum fh_action action, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&out->data, fmt, ap);
	va_end(ap);
	if (n < 0) {
		out->data = NULL;
		n = 0;
	}
	out->len = (size_t)n;
	out->action = action;
}

/* A complete answer with a body of len bytes. */
static inline void fh_reply_body(struct fh_reply *out, int status, const void *body, size_t len)
{
	char head[256];
	int h = snprintf(head, sizeof(head), "HTTP/1.1 %d X\r\nContent-Length: %zu\r\n\r\n", status,
			 len);
	out->data = malloc((size_t)h + len + 1);
	if (!out->data) {
		out->len = 0;
		return;
	}
	memcpy(out->data, head, (size_t)h);
	if (len)
		memcpy(out->data + h, body, len);
	out->len = (size_t)h + len;
	out->action = FH_KEEP;
}

static inline void fh_send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return;
		p += k;
		n -= (size_t)k;
	}
}

static inline void fh_conn_close(struct fh_server *s, unsigned i)
{
	close(s->conns[i].fd);
	free(s->conns[i].buf);
	s->conns[i] = s->conns[--s->nconns];
}

/* Parse what c holds; answer whole requests. Returns false to close. */
static inline bool fh_conn_work(struct fh_server *s, struct fh_conn *c)
{
	for (;;) {
		if (c->stalled) {
			c->len = 0;
			return true;
		}
		if (c->in_body) {
			size_t k = c->len < c->body_left ? c->len : (size_t)c->body_left;
			memmove(c->buf, c->buf + k, c->len - k);
			c->len -= k;
			c->body_left -= k;
			if (c->body_left)
				return true;
			c->in_body = false;
			struct fh_reply r = {0};
			s->handler(s->arg, c->method, c->target, &r);
			char line[2100];
			snprintf(line, sizeof(line), "%s %s ", c->method, c->target);
			pthread_mutex_lock(&s->lock);
			if (s->nlog < FH_MAX_LOG)
				s->log[s->nlog++] = strdup(line);
			pthread_mutex_unlock(&s->lock);
			atomic_fetch_add(&s->requests, 1);
			if (!r.data && r.action != FH_STALL)
				fh_reply_fmt(&r, FH_CLOSE,
					     "HTTP/1.1 500 X\r\nContent-Length: 0\r\n\r\n");
			if (r.action == FH_STALL) {
				free(r.data);
				c->stalled = true;
				continue;
			}
			fh_send_all(c->fd, r.data, r.len);
			free(r.data);
			if (r.action == FH_CLOSE)
				return false;
			continue;
		}
		char *end = c->len >= 4 ? memmem(c->buf, c->len, "\r\n\r\n", 4) : NULL;
		if (!end)
			return c->len < FH_HDR_MAX;
		*end = '\0';
		size_t hlen = (size_t)(end - c->buf) + 4;
		if (sscanf(c->buf, "%15s %2047s", c->method, c->target) != 2)
			return false;
		c->body_left = 0;
		bool expect = false;
		for (char *l = strstr(c->buf, "\r\n"); l; l = strstr(l + 2, "\r\n")) {
			if (!strncasecmp(l + 2, "Content-Length:", 15))
				c->body_left = strtoull(l + 17, NULL, 10);
			if (!strncasecmp(l + 2, "Expect: 100-continue", 20))
				expect = true;
		}
		memmove(c->buf, c->buf + hlen, c->len - hlen);
		c->len -= hlen;
		if (expect && c->body_left)
			fh_send_all(c->fd, "HTTP/1.1 100 Continue\r\n\r\n", 25);
		c->in_body = true;
	}
}

static void *fh_main(void *arg)
{
	struct fh_server *s = arg;
	struct pollfd pf[FH_MAX_CONNS + 1];
	while (!atomic_load(&s->stop)) {
		pf[0] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
		for (unsigned i = 0; i < s->nconns; i++)
			pf[i + 1] = (struct pollfd){.fd = s->conns[i].fd, .events = POLLIN};
		unsigned n = s->nconns;
		if (poll(pf, n + 1, 20) <= 0)
			continue;
		for (unsigned i = n; i-- > 0;) {
			if (!(pf[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			struct fh_conn *c = &s->conns[i];
			char tmp[65536];
			ssize_t k = recv(c->fd, tmp, sizeof(tmp), 0);
			if (k <= 0) {
				fh_conn_close(s, i);
				continue;
			}
			char *b = realloc(c->buf, c->len + (size_t)k + 1);
			if (!b) {
				fh_conn_close(s, i);
				continue;
			}
			c->buf = b;
			memcpy(c->buf + c->len, tmp, (size_t)k);
			c->len += (size_t)k;
			c->buf[c->len] = '\0';
			if (!fh_conn_work(s, c))
				fh_conn_close(s, i);
		}
		if (pf[0].revents & POLLIN) {
			int fd = accept(s->lfd, NULL, NULL);
			if (fd >= 0 && s->nconns < FH_MAX_CONNS)
				s->conns[s->nconns++] = (struct fh_conn){.fd = fd};
			else if (fd >= 0)
				close(fd);
		}
	}
	return NULL;
}

/* Start a server; returns 0 or -errno. */
static inline int fh_start(struct fh_server *s, fh_handler handler, void *arg)
{
	memset(s, 0, sizeof(*s));
	s->handler = handler;
	s->arg = arg;
	pthread_mutex_init(&s->lock, NULL);
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->lfd < 0)
		return -errno;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	if (bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) || listen(s->lfd, 128) ||
	    getsockname(s->lfd, (struct sockaddr *)&a, &al)) {
		int e = -errno;
		close(s->lfd);
		return e;
	}
	s->port = ntohs(a.sin_port);
	int rc = pthread_create(&s->thread, NULL, fh_main, s);
	if (rc) {
		close(s->lfd);
		return -rc;
	}
	return 0;
}

static inline void fh_stop(struct fh_server *s)
{
	atomic_store(&s->stop, true);
	pthread_join(s->thread, NULL);
	while (s->nconns)
		fh_conn_close(s, 0);
	close(s->lfd);
	for (unsigned i = 0; i < s->nlog; i++)
		free(s->log[i]);
	pthread_mutex_destroy(&s->lock);
}

/* Was a request line containing needle seen? */
static inline bool fh_saw(struct fh_server *s, const char *needle)
{
	bool seen = false;
	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < s->nlog && !seen; i++)
		seen = s->log[i] && strstr(s->log[i], needle);
	pthread_mutex_unlock(&s->lock);
	return seen;
}

static inline unsigned fh_count(struct fh_server *s, const char *needle)
{
	unsigned n = 0;
	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < s->nlog; i++)
		n += s->log[i] && strstr(s->log[i], needle);
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* "http://127.0.0.1:<port>" */
static inline void fh_endpoint(const struct fh_server *s, char *out, size_t size)
{
	snprintf(out, size, "http://127.0.0.1:%d", s->port);
}

#endif
