// SPDX-License-Identifier: MIT
/* version.c - the library's version, for programs built against another header. */
#include "config.h"

#include "vmmx.h"

VMMX_API unsigned int vmmx_version(void)
{
	return VMMX_VERSION;
}
