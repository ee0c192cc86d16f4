/* SPDX-License-Identifier: MIT */
/* Change notification for include trees: see watch.h for the contract. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "common/util.h"
#include "common/watch.h"
#include "jitcache/jitcache.h"

/* Every change that can alter what a lookup, a listing or a read finds.
 * Not IN_ACCESS / IN_OPEN / IN_CLOSE_NOWRITE: reads (NVRTC's, the scan's)
 * must not invalidate. */
#define MASK                                                                                       \
	(IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM |          \
	 IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_DONT_FOLLOW)

#define MAX_TREES  1024u /* slots; the stamp's low 10 bits name one */
#define SLOT_BITS  10
#define WD_BUCKETS 4096u
#define MAX_LINKS  40 /* symbolic links followed in one resolution (Linux's ELOOP) */

/*
 * One inotify watch, the trees that hold it, and for a directory the names
 * their resolutions look up in it: a create, delete, rename or attribute
 * change of another name there is no change to them (unless a tree lists
 * the directory). A write to a file in it is seen, when it matters, by the
 * file's own watch.
 */
struct wdnode {
	int wd;
	int listed; /* a DIR entry lists it: every name counts */
	size_t n, cap;
	uint32_t *trees; /* tree slots */
	char **names;	 /* owned */
	size_t n_names, cap_names;
	struct wdnode *next; /* bucket chain */
};

struct tree {
	uint64_t stamp; /* 0: slot free */
	int valid;
	int *wds; /* the watches it holds (released when invalidated) */
	size_t n, cap;
};

struct jc_watch {
	pthread_mutex_t lock;
	int fd;
	uint32_t max_watches;
	uint32_t n_watches;
	uint64_t seq;
	uint64_t invalidations, overflows;
	struct wdnode *buckets[WD_BUCKETS];
	struct tree trees[MAX_TREES];
};

int jc__watch_new(uint32_t max_watches, struct jc_watch **out, char *err, size_t errlen)
{
	struct jc_watch *w = calloc(1, sizeof(*w));
	*out = NULL;
	if (!w)
		return jc__fail(err, errlen, JC_ENOMEM, "out of memory");
	pthread_mutex_init(&w->lock, NULL);
	w->max_watches = max_watches;
	w->fd = -1;
	if (max_watches && (w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0) {
		int rc = jc__fail(err, errlen, JC_EIO, "inotify_init1: %s", strerror(errno));
		pthread_mutex_destroy(&w->lock);
		free(w);
		return rc;
	}
	*out = w;
	return 0;
}

static struct wdnode **node_slot(struct jc_watch *w, int wd)
{
	struct wdnode **p = &w->buckets[(uint32_t)wd % WD_BUCKETS];
	while (*p && (*p)->wd != wd)
		p = &(*p)->next;
	return p;
}

static void node_free(struct wdnode *nd)
{
	for (size_t i = 0; i < nd->n_names; i++)
		free(nd->names[i]);
	free(nd->names);
	free(nd->trees);
	free(nd);
}

/* Drops tree t's hold on each of its watches (removing those it held
 * alone) and marks it invalid. Under lock. */
static void tree_release(struct jc_watch *w, struct tree *t)
{
	uint32_t slot = (uint32_t)(t - w->trees);
	for (size_t i = 0; i < t->n; i++) {
		struct wdnode **p = node_slot(w, t->wds[i]), *nd = *p;
		if (!nd)
			continue;
		for (size_t k = 0; k < nd->n; k++)
			if (nd->trees[k] == slot) {
				nd->trees[k] = nd->trees[--nd->n];
				break;
			}
		if (nd->n == 0) {
			inotify_rm_watch(w->fd, nd->wd); /* EINVAL when already gone: fine */
			*p = nd->next;
			node_free(nd);
			w->n_watches--;
		}
	}
	free(t->wds);
	t->wds = NULL;
	t->n = t->cap = 0;
	t->valid = 0;
}

/* Every tree holding wd becomes invalid. Under lock. */
static void invalidate_wd(struct jc_watch *w, int wd)
{
	struct wdnode *nd;
	while ((nd = *node_slot(w, wd)) && nd->n) {
		w->invalidations++;
		tree_release(w, &w->trees[nd->trees[nd->n - 1]]);
	}
}

static void invalidate_all(struct jc_watch *w)
{
	for (uint32_t i = 0; i < MAX_TREES; i++)
		if (w->trees[i].valid) {
			w->invalidations++;
			tree_release(w, &w->trees[i]);
		}
}

/* Does ev change what a tree holding its watch resolves, lists or reads? */
static int relevant(struct jc_watch *w, const struct inotify_event *ev)
{
	if (ev->len == 0 || !ev->name[0])
		return 1; /* the watched file or directory itself */
	if (!(ev->mask & (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB)))
		return 0; /* a write to a file in it: its own watch says whether it matters */
	const struct wdnode *nd = *node_slot(w, ev->wd);
	if (!nd || nd->listed)
		return 1;
	for (size_t i = 0; i < nd->n_names; i++)
		if (strcmp(nd->names[i], ev->name) == 0)
			return 1;
	return 0;
}

static void drain_locked(struct jc_watch *w)
{
	/* Aligned as the kernel writes struct inotify_event records. */
	char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
	for (;;) {
		ssize_t n = read(w->fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* EAGAIN: drained (an error other than that cannot be told apart)
				 */
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			if (ev->mask & IN_Q_OVERFLOW) {
				w->overflows++;
				invalidate_all(w);
			} else if (relevant(w, ev)) {
				invalidate_wd(w, ev->wd);
			}
			p += sizeof(*ev) + ev->len;
		}
	}
}

void jc__watch_drain(struct jc_watch *w)
{
	if (!w || w->fd < 0)
		return;
	pthread_mutex_lock(&w->lock);
	drain_locked(w);
	pthread_mutex_unlock(&w->lock);
}

int jc__watch_fd(const struct jc_watch *w)
{
	return w ? w->fd : -1;
}

/* 1 when the file system of st_path may change without an inotify event
 * reaching us (changes made on other hosts). */
static int remote_fs(const char *path)
{
	struct statfs sf;
	if (statfs(path, &sf) != 0)
		return 1;
	switch ((unsigned long)sf.f_type) {
	case 0x6969:	 /* NFS */
	case 0x517B:	 /* SMB */
	case 0xFF534D42: /* CIFS */
	case 0xFE534D42: /* SMB2 */
	case 0x65735546: /* FUSE */
	case 0x01021997: /* 9p */
	case 0x00C36400: /* Ceph */
	case 0x5346414F: /* AFS */
	case 0x6B414653: /* kAFS */
	case 0x0BD00BD0: /* Lustre */
	case 0x47504653: /* GPFS */
	case 0x73757245: /* Coda */
		return 1;
	default:
		return 0;
	}
}

/* Registration state of one jc__watch_tree call. */
struct reg {
	struct jc_watch *w;
	struct tree *t;
	uint32_t slot;
	uint64_t dev_checked; /* st_dev of the last directory whose file system passed */
	int why;
};

/* Room for one more of n elements of size elem in *v (capacity *cap,
 * doubled; first when empty). 0 or -1. */
static int grow(void **v, size_t *cap, size_t n, size_t elem, size_t first)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : first;
	void *p = realloc(*v, c * elem);
	if (!p)
		return -1;
	*v = p;
	*cap = c;
	return 0;
}

/* Watches path (a directory, or the regular file itself) for tree r->t.
 * Returns its watch descriptor, or -1 with r->why set. */
static int watch_one(struct reg *r, const char *path, int is_dir, dev_t dev)
{
	struct jc_watch *w = r->w;
	if (is_dir && (uint64_t)dev != r->dev_checked) {
		if (remote_fs(path))
			return r->why = JC_WATCH_REMOTE, -1;
		r->dev_checked = (uint64_t)dev;
	}
	if (w->n_watches >= w->max_watches)
		return r->why = JC_WATCH_BUDGET, -1;
	int wd = inotify_add_watch(w->fd, path, MASK | (is_dir ? IN_ONLYDIR : 0));
	if (wd < 0)
		return r->why = JC_WATCH_LIMIT, -1;
	struct wdnode **p = node_slot(w, wd), *nd = *p;
	if (!nd) {
		if (!(nd = calloc(1, sizeof(*nd))))
			return r->why = JC_WATCH_NOMEM, -1;
		nd->wd = wd;
		*p = nd;
		w->n_watches++;
	}
	for (size_t k = 0; k < nd->n; k++)
		if (nd->trees[k] == r->slot)
			return wd; /* this tree holds it already */
	struct tree *t = r->t;
	if (grow((void **)&nd->trees, &nd->cap, nd->n, sizeof(*nd->trees), 2) != 0 ||
	    grow((void **)&t->wds, &t->cap, t->n, sizeof(*t->wds), 64) != 0)
		return r->why = JC_WATCH_NOMEM, -1;
	nd->trees[nd->n++] = r->slot;
	t->wds[t->n++] = wd;
	return wd;
}

/* Records that a resolution looks name up in the directory of wd. */
static int add_name(struct reg *r, int wd, const char *name)
{
	struct wdnode *nd = *node_slot(r->w, wd);
	if (!nd || nd->listed)
		return 0;
	for (size_t i = nd->n_names; i-- > 0;) /* the newest first: runs repeat */
		if (strcmp(nd->names[i], name) == 0)
			return 0;
	if (grow((void **)&nd->names, &nd->cap_names, nd->n_names, sizeof(*nd->names), 4) != 0 ||
	    !(nd->names[nd->n_names] = strdup(name)))
		return r->why = JC_WATCH_NOMEM, -1;
	nd->n_names++;
	return 0;
}

/*
 * Resolves path (absolute) as the kernel would, one component at a time,
 * watching every directory before a name is looked up in it (and recording
 * that name there), the directory reached at the end (listed too, with
 * list), and with file a regular file reached at the end. Stops quietly
 * where the resolution stops (a missing name, a non-directory in the
 * middle): the watched directory there sees the name appear. Returns the
 * watch of the last directory reached when the whole path is one, else
 * -1; r->why says whether it failed.
 */
static int resolve(struct reg *r, const char *path, int file, int list)
{
	char cur[PATH_MAX] = "/", rest[PATH_MAX], next[PATH_MAX], link[PATH_MAX];
	int wds[PATH_MAX / 2]; /* the watch of each directory of cur, "/" first */
	size_t depth = 0;
	struct stat st;
	int links = 0;
	if (stat("/", &st) != 0)
		return r->why = JC_WATCH_LIMIT, -1;
	if ((wds[0] = watch_one(r, "/", 1, st.st_dev)) < 0)
		return -1;
	if (snprintf(rest, sizeof(rest), "%s", path) >= (int)sizeof(rest))
		return -1; /* NVRTC cannot open it either; the stat walk says so */
	char *p = rest;
	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		char *end = strchr(p, '/');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char comp[NAME_MAX + 1];
		if (len > NAME_MAX)
			return -1;
		memcpy(comp, p, len);
		comp[len] = '\0';
		p += len;
		int last = strspn(p, "/") == strlen(p);
		if (strcmp(comp, ".") == 0)
			continue;
		if (strcmp(comp, "..") == 0) { /* cur is real: its parent is lexical */
			char *slash = strrchr(cur, '/');
			slash[slash == cur] = '\0';
			depth -= depth > 0;
			continue;
		}
		if (snprintf(next, sizeof(next), "%s%s%s", cur, strcmp(cur, "/") ? "/" : "",
			     comp) >= (int)sizeof(next))
			return -1;
		if (add_name(r, wds[depth], comp) != 0)
			return -1;
		if (lstat(next, &st) != 0)
			return -1; /* missing: cur (watched, with the name) sees it made */
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlink(next, link, sizeof(link) - 1);
			if (n < 0 || ++links > MAX_LINKS)
				return -1; /* NVRTC's open fails too; a change of the link is in cur
					    */
			link[n] = '\0';
			char joined[PATH_MAX];
			if (snprintf(joined, sizeof(joined), "%s/%s", link, p) >=
			    (int)sizeof(joined))
				return -1;
			snprintf(rest, sizeof(rest), "%s", joined);
			p = rest;
			if (link[0] == '/') {
				snprintf(cur, sizeof(cur), "/");
				depth = 0;
			}
			continue;
		}
		if (S_ISDIR(st.st_mode) && depth + 1 < sizeof(wds) / sizeof(wds[0])) {
			snprintf(cur, sizeof(cur), "%s", next);
			if ((wds[++depth] = watch_one(r, cur, 1, st.st_dev)) < 0)
				return -1;
			continue;
		}
		if (last && file && S_ISREG(st.st_mode))
			watch_one(r, next, 0, st.st_dev);
		return -1; /* a file: resolution ends here */
	}
	if (list) {
		struct wdnode *nd = *node_slot(r->w, wds[depth]);
		if (nd)
			nd->listed = 1;
	}
	return wds[depth];
}

uint64_t jc__watch_tree(struct jc_watch *w, const struct jc_inc_set *set, int *why)
{
	*why = JC_WATCH_OFF;
	if (!w || w->fd < 0)
		return 0;
	pthread_mutex_lock(&w->lock);
	drain_locked(w);
	uint32_t slot = MAX_TREES;
	for (uint32_t i = 0; i < MAX_TREES && slot == MAX_TREES; i++)
		if (!w->trees[i].valid) /* free, or invalidated: its stamp cannot be valid again */
			slot = i;
	struct reg r = {.w = w, .slot = slot, .dev_checked = (uint64_t)-1};
	if (slot == MAX_TREES) {
		pthread_mutex_unlock(&w->lock);
		*why = JC_WATCH_BUDGET;
		return 0;
	}
	r.t = &w->trees[slot];
	const uint64_t stamp = r.t->stamp = (++w->seq << SLOT_BITS) | slot;
	r.t->valid = 1;
	/* Entries are sorted by path, so the directory part of neighbouring
	 * FILE and ABSENT entries repeats: it is resolved once per run. The
	 * lock is let go between entries (the loop thread drains and checks
	 * stamps meanwhile); an event may then invalidate the tree so far. */
	char last_dir[PATH_MAX] = "\001";
	int dir_wd = -1;
	for (size_t i = 0; i < set->n && r.why == 0; i++) {
		const struct jc_inc_entry *e = &set->v[i];
		pthread_mutex_unlock(&w->lock);
		pthread_mutex_lock(&w->lock);
		if (r.t->stamp != stamp || !r.t->valid)
			break;
		if (e->kind == JC_INC_LINK)
			continue; /* its FILE entry follows the link */
		const char *slash = strrchr(e->path, '/');
		size_t dlen = slash ? (size_t)(slash - e->path) : 0;
		if ((e->kind != JC_INC_FILE && e->kind != JC_INC_ABSENT) || !slash || !slash[1] ||
		    dlen >= sizeof(last_dir)) {
			/* DIR: the directory, listed, and the way to it; TOOLKIT: the way */
			resolve(&r, e->path, 0, e->kind == JC_INC_DIR);
			continue;
		}
		if (strlen(last_dir) != dlen || strncmp(last_dir, e->path, dlen) != 0) {
			snprintf(last_dir, sizeof(last_dir), "%.*s", (int)dlen, e->path);
			dir_wd = resolve(&r, dlen ? last_dir : "/", 0, 0);
		}
		/* The last name, looked up in a directory now watched (or in one
		 * that does not exist: its watched ancestor sees it made). */
		struct stat st;
		if (dir_wd < 0 || add_name(&r, dir_wd, slash + 1) != 0 || lstat(e->path, &st) != 0)
			continue;
		if (S_ISLNK(st.st_mode))
			resolve(&r, e->path, 1, 0); /* where the link leads, and the file there */
		else if (S_ISREG(st.st_mode))
			watch_one(&r, e->path, 0, st.st_dev);
	}
	uint64_t out = stamp;
	if (r.t->stamp != stamp) {
		out = 0; /* invalidated, and the slot taken by another tree */
	} else if (r.why != 0 || !r.t->valid) {
		tree_release(w, r.t); /* (nothing left to release when invalidated) */
		r.t->stamp = 0;
		out = 0;
	}
	pthread_mutex_unlock(&w->lock);
	*why = r.why;
	return out;
}

uint64_t jc__watch_checked(struct jc_watch *w, struct jc_inc_set *set, const struct jc_inc_ctx *ctx,
			   int *why)
{
	*why = JC_WATCH_OK;
	if (set->unsettled)
		return 0;
	uint64_t stamp = jc__watch_tree(w, set, why);
	if (stamp && (jc__inc_check(set, ctx) != 1 || set->unsettled)) {
		jc__watch_forget(w, stamp);
		*why = JC_WATCH_OK;
		stamp = 0;
	}
	return stamp;
}

int jc__watch_valid(struct jc_watch *w, uint64_t stamp)
{
	if (!w || w->fd < 0 || !stamp)
		return 0;
	pthread_mutex_lock(&w->lock);
	drain_locked(w);
	const struct tree *t = &w->trees[stamp & (MAX_TREES - 1)];
	int ok = t->stamp == stamp && t->valid;
	pthread_mutex_unlock(&w->lock);
	return ok;
}

void jc__watch_forget(struct jc_watch *w, uint64_t stamp)
{
	if (!w || !stamp)
		return;
	pthread_mutex_lock(&w->lock);
	struct tree *t = &w->trees[stamp & (MAX_TREES - 1)];
	if (t->stamp == stamp) {
		tree_release(w, t);
		t->stamp = 0;
	}
	pthread_mutex_unlock(&w->lock);
}

void jc__watch_stats(struct jc_watch *w, struct jc_watch_stats *out, int take)
{
	memset(out, 0, sizeof(*out));
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	out->bytes = sizeof(*w);
	for (uint32_t i = 0; i < MAX_TREES; i++) {
		out->trees += w->trees[i].valid;
		out->bytes += w->trees[i].cap * sizeof(int);
	}
	for (uint32_t b = 0; b < WD_BUCKETS; b++)
		for (const struct wdnode *nd = w->buckets[b]; nd; nd = nd->next) {
			out->bytes += sizeof(*nd) + nd->cap * sizeof(uint32_t) +
				      nd->cap_names * sizeof(char *);
			for (size_t i = 0; i < nd->n_names; i++)
				out->bytes += strlen(nd->names[i]) + 1;
		}
	out->watches = w->n_watches;
	out->invalidations = w->invalidations;
	out->overflows = w->overflows;
	if (take)
		w->invalidations = w->overflows = 0;
	pthread_mutex_unlock(&w->lock);
}

void jc__watch_free(struct jc_watch *w)
{
	if (!w)
		return;
	for (uint32_t i = 0; i < MAX_TREES; i++)
		free(w->trees[i].wds);
	for (uint32_t b = 0; b < WD_BUCKETS; b++)
		for (struct wdnode *nd = w->buckets[b], *next; nd; nd = next) {
			next = nd->next;
			node_free(nd);
		}
	if (w->fd >= 0)
		close(w->fd);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
