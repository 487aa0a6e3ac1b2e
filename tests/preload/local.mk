# SPDX-License-Identifier: MIT
# The interposer on the sim backend, through a fake CUDA runtime and driver
# of the tests' own (no GPU, no CUDA runtime needed).
check_LTLIBRARIES += %D%/libvmmxfakecuda.la
%C%_libvmmxfakecuda_la_SOURCES = %D%/fakecuda.c %D%/fakecuda.h
%C%_libvmmxfakecuda_la_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS)
%C%_libvmmxfakecuda_la_LIBADD = $(PTHREAD_LIBS)
# -rpath makes it a shared library; -Bsymbolic: its calls to itself stay its own,
# as a real libcuda's do, past the interposer.
%C%_libvmmxfakecuda_la_LDFLAGS = $(AM_LDFLAGS) -avoid-version -rpath /nowhere \
	-Wl,-Bsymbolic-functions

check_PROGRAMS += %D%/client
%C%_client_SOURCES = %D%/client.c tests/tap/basic.c tests/tap/basic.h
%C%_client_CPPFLAGS = $(AM_CPPFLAGS) -DFAKECUDA_SO='"libvmmxfakecuda.so"'
%C%_client_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS)
%C%_client_LDADD = %D%/libvmmxfakecuda.la lib/libvmmx.la $(PTHREAD_LIBS)
%C%_client_LDFLAGS = $(AM_LDFLAGS) -no-install

TESTS += %D%/hooks.sh %D%/run.sh %D%/lookup.sh
EXTRA_DIST += %D%/hooks.sh %D%/run.sh %D%/lookup.sh %D%/env.sh
# GPU programs, run by hand on the GPU machine (docs/PRELOAD.md has the commands).
EXTRA_DIST += docs/PRELOAD.md %D%/gpu_fill.cu %D%/alloc_bench.cu %D%/fork_threads.cu %D%/torch_chain.py %D%/cupy_fill.py %D%/gpu.sh
