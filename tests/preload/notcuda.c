// SPDX-License-Identifier: MIT
/*
 * notcuda.c - a library that is not the CUDA driver but defines a name the
 * interposer takes over (as a program's own wrapper or a shim would): a
 * lookup on its handle must give its own function back (dlclient.c).
 */
#include "config.h"

int cuMemAlloc_v2(unsigned long long *p, unsigned long n);

int cuMemAlloc_v2(unsigned long long *p, unsigned long n)
{
	*p = 0x1234;
	(void)n;
	return 0;
}
