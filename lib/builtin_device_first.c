// SPDX-License-Identifier: MIT
/* builtin_device_first.c - the shipped device-first policy compiled into libvmmx, so it works with no plugin directory. */
#define VMMX_POLICY_BUILTIN vmmx__policy_device_first_entry
#include "policies/device_first.c"
