// SPDX-License-Identifier: MIT
/*
 * place.c - built-in placement policies behind the vmmx__policy seam.
 *
 * A policy only ranks locations for the next chunk; buf.c owns the
 * mechanics (limits, chunk sizes, out-of-memory retries, fallback down the
 * ranking, statistics).  That split keeps policies small enough to become
 * plugins without exposing libvmmx internals.
 *
 * No state, no locks: rank() is pure.
 */
#include "config.h"

#include <string.h>

#include "internal.h"

static int rank_device(const struct vmmx__policy *pol, const struct vmmx__place_req *req,
		       struct vmmx_loc *locs, int max)
{
	locs[0] = (struct vmmx_loc){ VMMX_LOC_DEVICE, req->device };
	return 1;
}

static int rank_host(const struct vmmx__policy *pol, const struct vmmx__place_req *req,
		     struct vmmx_loc *locs, int max)
{
	locs[0] = (struct vmmx_loc){ VMMX_LOC_HOST, 0 };
	return 1;
}

/* The Linux "sysmem fallback": the device while it has room, then pinned host memory. */
static int rank_device_first(const struct vmmx__policy *pol, const struct vmmx__place_req *req,
			     struct vmmx_loc *locs, int max)
{
	if (max < 2)
		return -VMMX_EINVAL;
	locs[0] = (struct vmmx_loc){ VMMX_LOC_DEVICE, req->device };
	locs[1] = (struct vmmx_loc){ VMMX_LOC_HOST, 0 };
	return 2;
}

static const struct vmmx__policy builtin[] = {
	{ .name = "device-first", .rank = rank_device_first },
	{ .name = "device", .rank = rank_device },
	{ .name = "host", .rank = rank_host },
};

const struct vmmx__policy *vmmx__policy_find(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++)
		if (strlen(builtin[i].name) == len && !memcmp(builtin[i].name, name, len))
			return &builtin[i];
	return NULL;
}

const char *vmmx__policy_names(void)
{
	return "device-first, device, host";
}
