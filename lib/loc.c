// SPDX-License-Identifier: MIT
/*
 * loc.c - locations: their names ("device:0", "host", "host-numa:1",
 * "none"), as logs, traces, statistics and the tools write them.
 *
 * Locking: none.
 */
#include "config.h"

#include <stdio.h>

#include "internal/base.h"

VMMX_API const char *vmmx_loc_name(struct vmmx_loc loc, char *b, size_t len)
{
	switch (loc.kind) {
	case VMMX_LOC_DEVICE:
		snprintf(b, len, "device:%d", loc.id);
		break;
	case VMMX_LOC_HOST:
		snprintf(b, len, "host");
		break;
	case VMMX_LOC_HOST_NUMA:
		snprintf(b, len, "host-numa:%d", loc.id);
		break;
	default:
		snprintf(b, len, "none");
		break;
	}
	return b;
}
