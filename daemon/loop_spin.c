/* SPDX-License-Identifier: MIT */
/* Busy polling of the main loop while a client waits on short work
 * (loop_spin.h). */
#include "daemon/loop_spin.h"

#include <sched.h>

#include "common/util.h"

static void spin_cb(uv_idle_t *h)
{
	struct jc_loop_spin *s = h->data;
	if (jc__now_ns() >= s->until_ns)
		uv_idle_stop(h);
	else
		sched_yield();
}

int jc__loop_spin_init(struct jc_loop_spin *s, uv_loop_t *loop)
{
	s->until_ns = 0;
	s->idle.data = s;
	return uv_idle_init(loop, &s->idle);
}

void jc__loop_spin(struct jc_loop_spin *s)
{
	/* Answers still come while the daemon stops, after its handle closed. */
	if (!s || uv_is_closing((uv_handle_t *)&s->idle))
		return;
	s->until_ns = jc__now_ns() + JC_LOOP_SPIN_NS;
	if (!uv_is_active((uv_handle_t *)&s->idle))
		uv_idle_start(&s->idle, spin_cb);
}

void jc__loop_spin_close(struct jc_loop_spin *s)
{
	uv_idle_stop(&s->idle);
	uv_close((uv_handle_t *)&s->idle, NULL);
}
