// SPDX-License-Identifier: MIT
/*
 * fake.c - policy plugins for the loader tests, one shared object per
 * variant, each compiled from this file with one -DFAKE_<VARIANT>:
 *
 *   FAKE_OK        valid; ranks host only (so a test can tell it from the
 *                  built-ins), counts its calls with host->counter_add and
 *                  buffer births and deaths through buf_event
 *   FAKE_MAJOR     ABI major 2
 *   FAKE_SMALL     ops table size smaller than the mandatory members
 *   FAKE_NOENTRY   no vmmx_policy_entry symbol
 *   FAKE_NOCB      place is NULL
 *   FAKE_NAME      ops->name differs from the file name
 *   FAKE_NULL      vmmx_policy_entry returns NULL
 *   FAKE_INITFAIL  init logs an error through host->log and refuses
 *   FAKE_IMPOSTOR  FAKE_OK under the name fake_ok, but its init also counts
 *                  "impostor": the loader tests install it where fake_ok
 *                  must be refused and look for that counter
 *
 * Like a real plugin it includes only vmmx/policy.h and never links libvmmx.
 */
#include <stddef.h>
#include <string.h>

#include "vmmx/policy.h"

#if defined(FAKE_OK)
#define FAKE_NAME_STR "fake_ok"
#elif defined(FAKE_MAJOR)
#define FAKE_NAME_STR "fake_major"
#elif defined(FAKE_SMALL)
#define FAKE_NAME_STR "fake_small"
#elif defined(FAKE_NOENTRY)
#define FAKE_NAME_STR "fake_noentry"
#elif defined(FAKE_NOCB)
#define FAKE_NAME_STR "fake_nocb"
#elif defined(FAKE_NAME)
#define FAKE_NAME_STR "not_fake_name"
#elif defined(FAKE_NULL)
#define FAKE_NAME_STR "fake_null"
#elif defined(FAKE_INITFAIL)
#define FAKE_NAME_STR "fake_initfail"
#elif defined(FAKE_IMPOSTOR)
#define FAKE_NAME_STR "fake_ok"
#else
#error "define one FAKE_<VARIANT>"
#endif

#ifdef FAKE_MAJOR
#define FAKE_ABI ((uint32_t)((2u << 16) | 0u))
#else
#define FAKE_ABI VMMX_POLICY_ABI
#endif

#ifdef FAKE_SMALL
/* Everything up to, but not including, the mandatory place member. */
#define FAKE_SIZE ((uint32_t)offsetof(struct vmmx_policy_ops, place))
#else
#define FAKE_SIZE ((uint32_t)sizeof(struct vmmx_policy_ops))
#endif

/* The state is the host table: all this policy needs to count. */
static int fake_init(const struct vmmx_policy_host *host, const char *args, void **state_p)
{
#ifdef FAKE_INITFAIL
	host->log(host, VMMX_LOG_ERROR, "fake_initfail refuses every instance (args \"%s\")", args);
	return -VMMX_EINVAL;
#else
#ifdef FAKE_IMPOSTOR
	host->counter_add(host, "impostor", 1);
#endif
	host->counter_add(host, "inits", 1);
	*state_p = (void *)host;
	return 0;
#endif
}

static void fake_fini(void *state)
{
	(void)state;
}

/* Unused in FAKE_NOCB, whose table leaves place NULL. */
__attribute__((unused)) static int fake_place(void *state, const struct vmmx_policy_request *req,
					      struct vmmx_policy_answer *ans)
{
	const struct vmmx_policy_host *host = state;

	(void)req;
	host->counter_add(host, "places", 1);
	ans->locs[0] = (struct vmmx_loc){ VMMX_LOC_HOST, 0 };
	ans->nlocs = 1;
	return 0;
}

static void fake_buf_event(void *state, uint64_t buf_id, size_t capacity, int created)
{
	const struct vmmx_policy_host *host = state;

	(void)buf_id;
	(void)capacity;
	host->counter_add(host, created ? "created" : "destroyed", 1);
}

static const struct vmmx_policy_ops ops = {
	.abi_version = FAKE_ABI,
	.size = FAKE_SIZE,
	.name = FAKE_NAME_STR,
	.description = "a fake policy for the loader tests",
	.init = fake_init,
	.fini = fake_fini,
#ifndef FAKE_NOCB
	.place = fake_place,
#endif
	.buf_event = fake_buf_event,
};

#ifdef FAKE_NOENTRY
/* Exported, but under the wrong name. */
__attribute__((visibility("default"))) const struct vmmx_policy_ops *
vmmx_policy_entry_missing(uint32_t core_abi);

__attribute__((visibility("default"))) const struct vmmx_policy_ops *
vmmx_policy_entry_missing(uint32_t core_abi)
{
	(void)core_abi;
	return &ops;
}
#else
const struct vmmx_policy_ops *vmmx_policy_entry(uint32_t core_abi)
{
	(void)core_abi;
#ifdef FAKE_NULL
	(void)ops;
	return NULL;
#else
	return &ops;
#endif
}
#endif
