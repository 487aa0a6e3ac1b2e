// SPDX-License-Identifier: MIT
/* builtin_host.c - the shipped host policy compiled into libvmmx, so it works with no plugin directory. */
#define VMMX_POLICY_BUILTIN vmmx__policy_host_entry
#include "policies/host.c"
