/* SPDX-License-Identifier: MIT */
/*
 * internal.h - every internal header of lib/, for the white-box tests
 * (tests/) only.  The files of lib/ include the header of their own layer
 * (internal/base.h, mem.h, obj.h, addr.h, alloc.h), never this one;
 * .ci/check-layers enforces that.  docs/DESIGN.md ("Layers") has the
 * diagram.
 */
#ifndef VMMX_LIB_INTERNAL_H
#define VMMX_LIB_INTERNAL_H

#include "internal/alloc.h"

#endif /* VMMX_LIB_INTERNAL_H */
