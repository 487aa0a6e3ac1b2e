// SPDX-License-Identifier: MIT
/*
 * pin.c - the primitives every writer of a buffer shares: publishing a new
 * chunk table, and the pins and quiescing that keep a libvmmx copy from
 * running over a chunk being unmapped.
 *
 * They sit apart from buf.c so that the writers (resize in buf.c,
 * migrations in migrate.c, evictions in evict.c, read-mostly copies in
 * shadow.c) depend on them without depending on each other through them:
 * buf.c calls eviction and migration, which need only these.
 *
 * Layer: obj (docs/DESIGN.md, "Inside lib/").
 */
#include "config.h"

#include <sched.h>
#include <unistd.h>

#include "internal/obj.h"

void vmmx__table_publish(struct vmmx_buf *buf, struct vmmx__table *t)
{
	struct vmmx__table *old = buf->table;
	size_t *offs = vmmx__table_offs(t);

	for (size_t i = 0; i < t->n; i++)
		offs[i] = t->c[i].off;
	rcu_assign_pointer(buf->table, t);
	vmmx__retire(buf->ctx, old);
}

/*
 * Writers that unmap chunks a caller may still use through libvmmx
 * (shrink, trim, migrations) first make the buffer "moving" and wait until
 * no libvmmx call pins it (vmmx__buf_pin(), taken by copies and memsets
 * around their driver calls), or give up (vmmx__buf_quiesce(wait=false),
 * for moves the library starts itself).  A pin and a quiesce each store
 * their own flag, then read the other's, both sequentially consistent: at
 * least one of the two sees the other, so a copy never runs over a chunk
 * being unmapped.
 */
bool vmmx__buf_pin(struct vmmx_buf *buf)
{
	__atomic_fetch_add(&buf->users, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&buf->moving, __ATOMIC_SEQ_CST))
		return true;
	__atomic_fetch_sub(&buf->users, 1, __ATOMIC_RELEASE);
	return false;
}

void vmmx__buf_unpin(struct vmmx_buf *buf)
{
	__atomic_fetch_sub(&buf->users, 1, __ATOMIC_RELEASE);
}

/* Wait until @count is 0; each round yields, then sleeps (a copy or a move may take long). */
static void wait_zero(const unsigned int *count)
{
	for (unsigned int i = 0; __atomic_load_n(count, __ATOMIC_SEQ_CST); i++)
		if (i < 64)
			sched_yield();
		else
			usleep(50);
}

void vmmx__buf_wait_unpinned(struct vmmx_buf *buf)
{
	wait_zero(&buf->users);
}

/*
 * Not the quiesce's wait: a move by address holds its buffer while it
 * quiesces it, and would wait for itself.
 */
void vmmx__buf_wait_released(struct vmmx_buf *buf)
{
	wait_zero(&buf->users);
	wait_zero(&buf->holds);
}

bool vmmx__buf_quiesce(struct vmmx_buf *buf, bool wait)
{
	__atomic_store_n(&buf->moving, true, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&buf->users, __ATOMIC_SEQ_CST))
		return true;
	if (!wait) {
		__atomic_store_n(&buf->moving, false, __ATOMIC_RELEASE);
		return false;
	}
	vmmx__buf_wait_unpinned(buf);
	return true;
}

void vmmx__buf_unquiesce(struct vmmx_buf *buf)
{
	__atomic_store_n(&buf->moving, false, __ATOMIC_RELEASE);
}
