// SPDX-License-Identifier: MIT
/*
 * sim_world.c - the sim's host registrations are checked against every
 * instance of the process, as the real driver's are
 * (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED): a second instance, or a
 * second libvmmx context, may not register inside the first one's
 * registration or reservation.  Each instance checked only its own records,
 * so both used to succeed.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/vmm.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

static char last[512];

static void hook(void *arg, int level, int err, const char *msg)
{
	if (err)
		snprintf(last, sizeof(last), "%s", msg);
}

static struct vmm *open_sim(void)
{
	struct vmm_params p = { .backend = "sim", .sim_devices = 1, .report = hook };
	struct vmm *v;

	if (vmm_open(&p, &v))
		bail("vmm_open(sim) failed");
	return v;
}

static void instances(void)
{
	struct vmm *v1 = open_sim(), *v2 = open_sim();
	size_t n = 8 * MiB;
	unsigned char *buf = malloc(n);
	void *d, *x = NULL, *r;

	if (!buf)
		bail("out of memory");
	is_err(0, vmm_host_register(v1, buf, n, &d), "instance 1 registers 8 MiB");
	is_err(-VMMX_EEXIST, vmm_host_register(v2, buf + 4096, 4096, &x),
	       "instance 2 may not register inside it");
	like(last, "overlaps the registration", "the message names the registration in the way");
	like(last, "of another instance", "and says it is another instance's");
	is_err(-VMMX_EEXIST, vmm_host_register(v2, buf, n, &x),
	       "nor register the same range");
	is_err(-VMMX_EEXIST, vmm_host_register(v2, buf + n - 16, 32, &x),
	       "nor a range over its end");
	ok(x == NULL, "nothing was registered");
	is_err(-VMMX_ENOENT, vmm_host_unregister(v2, buf),
	       "instance 2 cannot unregister instance 1's registration");
	is_err(0, vmm_host_unregister(v1, buf), "instance 1 unregisters it");
	is_err(0, vmm_host_register(v2, buf + 4096, 4096, &x), "then instance 2 may register inside");
	is_err(0, vmm_host_unregister(v2, buf + 4096), "and unregister");

	/* reservations are the process's too */
	is_err(0, vmm_reserve(v1, 4 * MiB, 0, &r), "instance 1 reserves 4 MiB");
	is_err(-VMMX_EINVAL, vmm_host_register(v2, (char *)r + 2 * MiB, 4096, &x),
	       "instance 2 may not register inside instance 1's reservation");
	like(last, "lies in a reservation", "the message says why");
	is_err(0, vmm_unreserve(v1, r, 4 * MiB), "unreserved");
	free(buf);
	vmm_close(v2);
	vmm_close(v1);
}

static void contexts(void)
{
	struct vmmx_ctx *c1 = test_ctx(NULL), *c2 = test_ctx(NULL);
	unsigned char *m = malloc(1 * MiB);
	struct vmmx_buf *buf;
	void *d, *x = NULL;

	if (!m || vmmx_buf_create(c1, 8 * MiB, "host", &buf) || vmmx_buf_resize(buf, 4 * MiB))
		bail("contexts: %s", vmmx_last_error());
	is_err(0, vmmx_host_register(c1, m, MiB, &d), "context 1 registers 1 MiB");
	is_err(-VMMX_EEXIST, vmmx_host_register(c2, m + 4096, 4096, &x),
	       "context 2 may not register inside it");
	like(vmmx_last_error(), "overlaps the registration", "the message says why");
	is_err(-VMMX_EINVAL, vmmx_host_register(c2, (char *)vmmx_buf_ptr(buf) + MiB, 4096, &x),
	       "context 2 may not register inside context 1's buffer");
	like(vmmx_last_error(), "lies in a reservation", "the message says why");
	ok(x == NULL, "nothing was registered");
	is_err(0, vmmx_host_unregister(c1, m), "context 1 unregisters");
	free(m);
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(c2);
	vmmx_ctx_destroy(c1);
}

int main(void)
{
	if (!test_on_sim())
		skip_all("the sim's records: nothing to check on %s", test_backend());
	plan(15 + 7);
	instances();
	contexts();
	return tap_done();
}
