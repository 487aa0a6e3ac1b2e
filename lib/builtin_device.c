// SPDX-License-Identifier: MIT
/* builtin_device.c - the shipped device policy compiled into libvmmx, so it works with no plugin directory. */
#define VMMX_POLICY_BUILTIN vmmx__policy_device_entry
#include "policies/device.c"
