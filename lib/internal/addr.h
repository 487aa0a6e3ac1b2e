/* SPDX-License-Identifier: MIT */
/*
 * internal/addr.h - layer 3 of lib/: what works by address over the
 * objects.  Lookup (lookup.c), copies and memset (copy.c), prefetch
 * (prefetch.c), statistics (stats.c), device facts (info.c) and the HMM
 * diagnosis (hmm.c).  Includes obj.h (and through it every layer below).
 * Locking: mem.h has the whole order.
 */
#ifndef VMMX_LIB_INTERNAL_ADDR_H
#define VMMX_LIB_INTERNAL_ADDR_H

#include "obj.h"

/* ---- device facts, HMM (info.c, hmm.c) ---- */

/*
 * vmmx_hmm_probe() with the files it reads named by the caller (tests): the
 * driver's version text (/proc/driver/nvidia/version), nvidia_uvm's
 * uvm_disable_hmm parameter, the kernel configuration (plain or gzip); NULL
 * for a file that is not there.
 */
int vmmx__hmm_probe_paths(struct vmmx_ctx *ctx, struct vmmx_hmm_info *info,
			  const char *proc_version, const char *uvm_param, const char *kconfig);

#endif /* VMMX_LIB_INTERNAL_ADDR_H */
