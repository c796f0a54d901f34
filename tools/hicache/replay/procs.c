/*
 * hicache replay --processes: each instance of the fleet in its own OS
 * process, as engines on separate hosts would be.
 *
 * The parent keeps everything that is the replay's and not an engine's:
 * the clock, the queues, the router and its views, the fleet L3 set that
 * records who wrote each page. After the workload is loaded it forks one
 * child per instance (before any store or cache is opened, so that no
 * thread of the library is lost in a fork); the child opens its own store
 * handle on the shared L3 (a file dir, a bucket) and its own cache, and
 * then serves what the parent asks over a SOCK_SEQPACKET socketpair, one
 * fixed-size message each way:
 *
 *   START i flight now   sim_start() of request i: the reply carries its
 *                        outcome (0, 1 = no device room, -errno), its end
 *                        time and which pages it read from L3 and computes
 *   FINISH flight        sim_finish(): insert and release
 *   FLUSH                hc_cache_flush(): its background copies and L3
 *                        writes are done when the reply comes
 *   END                  flush, then its counters and cache stats; it exits
 *
 * Before a START goes to an instance, every other instance that served a
 * message since its last flush is flushed, and the START is sent only when
 * all of them answered: a request's L3 writes are published (the store's
 * set calls returned) before any later request starts anywhere, the rule
 * the in-process fleet keeps with flush_all(). So the processes see the
 * same L3 at every request and a sequential replay gives the same hits.
 *
 * A child ends when its socket closes (the parent's teardown, or the
 * parent dying: every child closes the parent's ends of the others'
 * sockets, so the last reference is the parent's), when the parent dies
 * (PR_SET_PDEATHSIG SIGTERM), and on SIGINT or SIGTERM; it then aborts
 * its requests and closes its cache and store before it exits, so nothing
 * is left behind. The parent reaps every child before it removes a
 * temporary L3 dir.
 */
#define _GNU_SOURCE
#include "replay.h"

#include "commands.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

enum { OP_READY, OP_START, OP_FINISH, OP_FLUSH, OP_END };

struct pmsg {
	uint32_t op, flight;
	uint64_t idx;
	double now;
};

/* A child's answer: READY, START, FINISH and FLUSH use the head; END
 * carries its counters and cache stats too. */
struct preply {
	int32_t rc;
	uint32_t op;
	double done_at;
	uint64_t full, put_from, l3_from, l3_pages;
	/* END */
	uint64_t requests, input_tokens, hit[3], verified, corrupt, l3_pages_read;
	double l3_seconds;
	struct inst_result ir;
	struct hc_cache_stats st;
};

struct procs {
	size_t n;
	pid_t *pid;  /* 0: not started or reaped */
	int *fd;     /* the parent's end; -1: closed */
	bool *dirty; /* served something since its last flush */
};

static int xsend(int fd, const void *m, size_t len)
{
	for (;;) {
		ssize_t n = send(fd, m, len, MSG_NOSIGNAL);
		if (n == (ssize_t)len)
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 ? -errno : -EPIPE;
	}
}

/* One message. stop: give up on a signal (a child); the parent retries,
 * since its child answers or closes anyway. 0, or -EPIPE (closed), or
 * -EINTR, or -errno. */
static int xrecv(int fd, void *m, size_t len, bool stop)
{
	for (;;) {
		ssize_t n = recv(fd, m, len, 0);
		if (n == (ssize_t)len)
			return 0;
		if (n < 0 && errno == EINTR) {
			if (stop && replay_stop)
				return -EINTR;
			continue;
		}
		return n < 0 ? -errno : -EPIPE;
	}
}

/* ---- the child ---- */

/* Serves the parent until END, a closed socket or a signal. Returns the
 * exit status. */
static int child_serve(struct sim *s, int fd)
{
	struct inst *in = &s->in[0];
	struct pmsg m;
	struct preply r;
	int rc;

	for (;;) {
		if (replay_stop || xrecv(fd, &m, sizeof(m), true))
			return 1; /* the parent is gone or we are told to stop */
		memset(&r, 0, sizeof(r));
		r.op = m.op;
		struct flight *f = m.flight < s->nfl ? &in->fl[m.flight] : NULL;
		switch (m.op) {
		case OP_START:
			if (!f || f->busy || m.idx >= s->w->n) {
				r.rc = -EPROTO;
				break;
			}
			s->now = m.now;
			r.rc = sim_start(s, in, (size_t)m.idx, f);
			if (r.rc == 0) {
				f->busy = true;
				r.done_at = f->done_at;
				r.full = f->full;
				r.put_from = f->put_from;
				r.l3_from = f->l3_from;
				r.l3_pages = f->l3_pages;
			}
			break;
		case OP_FINISH:
			if (!f || !f->busy) {
				r.rc = -EPROTO;
				break;
			}
			r.rc = sim_finish(s, in, f);
			f->busy = false;
			break;
		case OP_FLUSH:
		case OP_END:
			hc_cache_flush(in->c);
			if (m.op == OP_FLUSH)
				break;
			rc = hc_cache_stats(in->c, &r.st, sizeof(r.st));
			r.rc = rc;
			r.requests = s->res->requests;
			r.input_tokens = s->res->input_tokens;
			memcpy(r.hit, s->res->hit, sizeof(r.hit));
			r.verified = s->res->verified;
			r.corrupt = s->res->corrupt;
			r.l3_pages_read = s->res->l3_pages_read;
			r.l3_seconds = s->res->l3_seconds;
			r.ir = *in->res;
			break;
		default:
			r.rc = -EPROTO;
		}
		if (xsend(fd, &r, sizeof(r)))
			return 1;
		if (m.op == OP_END)
			return r.rc ? 1 : 0;
	}
}

/* Instance k in a fresh child: its store and cache, then serve. Never
 * returns. */
static void child_main(struct sim *ps, size_t k, int fd, uint64_t l1, uint64_t l2, bool with_l3)
{
	const struct replay_args *a = ps->a;
	struct sim s;
	struct replay_buf b;
	struct result res = {.name = ps->res->name};
	struct inst_result ir = {0};
	struct hc_store *store = NULL;
	struct preply r = {.op = OP_READY};
	double *ttft = calloc(ps->w->n ? ps->w->n : 1, sizeof(*ttft));
	bool sim_ok = false;
	int status = 1;

	(void)k;
	if (!ttft) {
		fprintf(stderr, "hicache replay: out of memory\n");
		r.rc = -ENOMEM;
	} else if (!(r.rc = sim_init(&s, a, ps->w, &b, ttft, &res, true, 1))) {
		sim_ok = true;
		s.in[0].res = &ir;
		s.in[0].host_pages = l2 / a->page_tokens;
		if (!(r.rc = with_l3 ? replay_open_store(a, &store) : 0) &&
		    !(r.rc = replay_open_cache(a, l1, l2, store, &s.in[0].c)))
			s.pbytes = hc_cache_page_bytes(s.in[0].c);
	}
	if (!xsend(fd, &r, sizeof(r)) && !r.rc)
		status = child_serve(&s, fd);
	if (sim_ok) {
		for (size_t j = 0; j < s.nfl; j++)
			if (s.in[0].fl[j].busy && s.in[0].fl[j].req)
				hc_cache_abort(s.in[0].fl[j].req);
		hc_cache_close(s.in[0].c);
		sim_free(&s);
	}
	hc_store_close(store);
	free(ttft);
	close(fd);
	/* Not exit(): the parent's stdio buffers and atexit work are its own. */
	_exit(status);
}

/* ---- the parent ---- */

/* Child k did not answer (rc): said unless we are stopping anyway. */
static int gone(struct sim *s, size_t k, int rc)
{
	if (!replay_stop)
		fprintf(stderr, "hicache replay: instance %zu (pid %d) is gone: %s\n", k,
			(int)s->procs->pid[k], strerror(-rc));
	return rc;
}

/* Ask child k and wait for its answer. */
static int ask(struct sim *s, size_t k, const struct pmsg *m, struct preply *r)
{
	struct procs *p = s->procs;
	int rc = xsend(p->fd[k], m, sizeof(*m));
	if (!rc)
		rc = xrecv(p->fd[k], r, sizeof(*r), false);
	return rc ? gone(s, k, rc) : 0;
}

int procs_spawn(struct sim *s, uint64_t l1, uint64_t l2, bool with_l3)
{
	struct procs *p = calloc(1, sizeof(*p));
	size_t n = s->ninst;
	pid_t parent = getpid();
	int rc = 0;

	if (p) {
		p->pid = calloc(n, sizeof(*p->pid));
		p->fd = malloc(n * sizeof(*p->fd));
		p->dirty = calloc(n, sizeof(*p->dirty));
	}
	if (!p || !p->pid || !p->fd || !p->dirty) {
		if (p) {
			free(p->pid);
			free(p->fd);
			free(p->dirty);
			free(p);
		}
		fprintf(stderr, "hicache replay: out of memory\n");
		return -ENOMEM;
	}
	for (size_t k = 0; k < n; k++)
		p->fd[k] = -1;
	p->n = n;
	s->procs = p;
	fflush(stdout);
	fflush(stderr);
	for (size_t k = 0; k < n; k++) {
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
			rc = -errno;
			fprintf(stderr, "hicache replay: socketpair: %s\n", strerror(errno));
			return rc;
		}
		pid_t pid = fork();
		if (pid < 0) {
			rc = -errno;
			fprintf(stderr, "hicache replay: fork: %s\n", strerror(errno));
			close(sv[0]);
			close(sv[1]);
			return rc;
		}
		if (pid == 0) {
			/* Dies with the parent, even one killed outright. */
			prctl(PR_SET_PDEATHSIG, SIGTERM);
			if (getppid() != parent)
				_exit(1);
			close(sv[0]);
			for (size_t j = 0; j < k; j++)
				close(p->fd[j]);
			child_main(s, k, sv[1], l1, l2, with_l3);
		}
		close(sv[1]);
		p->pid[k] = pid;
		p->fd[k] = sv[0];
	}
	/* The children set up at once; each says when it is ready. */
	for (size_t k = 0; k < n; k++) {
		struct preply r;
		int e = xrecv(p->fd[k], &r, sizeof(r), false);
		if (e)
			gone(s, k, e);
		if (!rc)
			rc = e ? e : r.rc;
	}
	return rc;
}

int procs_start(struct sim *s, struct inst *in, size_t i, struct flight *f)
{
	struct procs *p = s->procs;
	size_t k = (size_t)(in - s->in);
	struct pmsg m = {.op = OP_FLUSH};
	struct preply r;
	int rc;

	/* Publish every other instance's L3 writes first: all flush at once. */
	for (size_t j = 0; j < p->n; j++)
		if (j != k && p->dirty[j] && (rc = xsend(p->fd[j], &m, sizeof(m))))
			return gone(s, j, rc);
	for (size_t j = 0; j < p->n; j++) {
		if (j == k || !p->dirty[j])
			continue;
		if ((rc = xrecv(p->fd[j], &r, sizeof(r), false)))
			return gone(s, j, rc);
		p->dirty[j] = false;
	}
	m = (struct pmsg){.op = OP_START,
			  .flight = (uint32_t)(f - in->fl),
			  .idx = i,
			  .now = s->now};
	if ((rc = ask(s, k, &m, &r)))
		return rc;
	p->dirty[k] = true;
	f->idx = i;
	f->req = NULL;
	f->dev_pages = 0;
	f->full = f->put_from = f->l3_from = f->l3_pages = 0;
	if (r.rc)
		return r.rc; /* 1: no room now; -errno: the child said what */
	f->done_at = r.done_at;
	f->full = r.full;
	f->put_from = r.put_from;
	f->l3_from = r.l3_from;
	f->l3_pages = r.l3_pages;
	if (f->keys) {
		const struct request *q = &s->w->req[i];
		replay_gen_tokens(q, f->tok);
		fleet_page_keys(f->tok, replay_insert_len(q) / s->a->page_tokens, s->a->page_tokens,
				f->keys);
		sim_l3_read(s, in, f);
	}
	return 0;
}

int procs_finish(struct sim *s, struct inst *in, struct flight *f)
{
	size_t k = (size_t)(in - s->in);
	struct pmsg m = {.op = OP_FINISH, .flight = (uint32_t)(f - in->fl)};
	struct preply r;
	int rc = ask(s, k, &m, &r);

	s->procs->dirty[k] = true;
	return rc ? rc : r.rc;
}

int procs_collect(struct sim *s, struct hc_cache_stats *st)
{
	struct procs *p = s->procs;
	struct pmsg m = {.op = OP_END};
	struct result *res = s->res;
	int rc = 0;

	for (size_t k = 0; k < p->n; k++) {
		struct preply r;
		int e = ask(s, k, &m, &r);
		if (e || r.rc) {
			rc = rc ? rc : e ? e : r.rc;
			continue;
		}
		res->requests += r.requests;
		res->input_tokens += r.input_tokens;
		for (int t = 0; t < 3; t++) {
			res->hit[t] += r.hit[t];
			s->in[k].res->hit[t] += r.ir.hit[t];
		}
		res->verified += r.verified;
		res->corrupt += r.corrupt;
		res->l3_pages_read += r.l3_pages_read;
		res->l3_seconds += r.l3_seconds;
		s->in[k].res->requests += r.ir.requests;
		s->in[k].res->input_tokens += r.ir.input_tokens;
		st->pages_l3_write += r.st.pages_l3_write;
		st->bytes_h2d += r.st.bytes_h2d;
		st->bytes_d2h += r.st.bytes_d2h;
		st->bytes_l3_read += r.st.bytes_l3_read;
		st->bytes_l3_write += r.st.bytes_l3_write;
	}
	return rc;
}

void procs_free(struct sim *s)
{
	struct procs *p = s->procs;

	if (!p)
		return;
	/* A closed socket ends a child at its next message. */
	for (size_t k = 0; k < p->n; k++)
		if (p->fd[k] >= 0)
			close(p->fd[k]);
	for (size_t k = 0; k < p->n; k++) {
		while (p->pid[k] > 0 && waitpid(p->pid[k], NULL, 0) < 0 && errno == EINTR)
			;
	}
	free(p->pid);
	free(p->fd);
	free(p->dirty);
	free(p);
	s->procs = NULL;
}
