# SPDX-License-Identifier: MIT
# The interposer on the sim backend, through a fake CUDA runtime and driver
# of the tests' own (no GPU, no CUDA runtime needed).
check_LTLIBRARIES += %D%/libvmmxfakecuda.la
%C%_libvmmxfakecuda_la_SOURCES = %D%/fakecuda.c %D%/fakecuda.h
%C%_libvmmxfakecuda_la_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS)
%C%_libvmmxfakecuda_la_LIBADD = -ldl $(PTHREAD_LIBS)
# -rpath makes it a shared library; -Bsymbolic: its calls to itself stay its own,
# as a real libcuda's do, past the interposer.
%C%_libvmmxfakecuda_la_LDFLAGS = $(AM_LDFLAGS) -avoid-version -rpath /nowhere \
	-Wl,-Bsymbolic-functions -Wl,--version-script=$(srcdir)/%D%/fakecuda.map
EXTRA_%C%_libvmmxfakecuda_la_DEPENDENCIES = %D%/fakecuda.map
# A library that is not the driver but defines cuMemAlloc_v2 (dlclient.c).
check_LTLIBRARIES += %D%/libvmmxnotcuda.la
%C%_libvmmxnotcuda_la_SOURCES = %D%/notcuda.c
%C%_libvmmxnotcuda_la_LDFLAGS = $(AM_LDFLAGS) -avoid-version -rpath /nowhere

check_PROGRAMS += %D%/client
%C%_client_SOURCES = %D%/client.c tests/tap/basic.c tests/tap/basic.h
%C%_client_CPPFLAGS = $(AM_CPPFLAGS) -DFAKECUDA_SO='"libvmmxfakecuda.so"'
%C%_client_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS)
%C%_client_LDADD = %D%/libvmmxfakecuda.la lib/libvmmx.la $(PTHREAD_LIBS)
%C%_client_LDFLAGS = $(AM_LDFLAGS) -no-install

# A program linked against no CUDA library that finds the driver by dlopen,
# dlsym, dlvsym and cuGetProcAddress, as XLA, Triton and cuda-python do.
check_PROGRAMS += %D%/dlclient
%C%_dlclient_SOURCES = %D%/dlclient.c tests/tap/basic.c tests/tap/basic.h
%C%_dlclient_CPPFLAGS = $(AM_CPPFLAGS) -DNOTCUDA_SO='"libvmmxnotcuda.so"'
%C%_dlclient_LDADD = lib/libvmmx.la -ldl
%C%_dlclient_LDFLAGS = $(AM_LDFLAGS) -no-install

# Kernel launches watched, counted and traced (launches.sh runs it).
check_PROGRAMS += %D%/launchclient
%C%_launchclient_SOURCES = %D%/launchclient.c tests/tap/basic.c tests/tap/basic.h
%C%_launchclient_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS)
%C%_launchclient_LDADD = %D%/libvmmxfakecuda.la lib/libvmmx.la -ldl $(PTHREAD_LIBS)
%C%_launchclient_LDFLAGS = $(AM_LDFLAGS) -no-install

# The launch cycle learner driven directly, on a PyTorch chain's launches (no interposer).
check_PROGRAMS += %D%/cycle
%C%_cycle_SOURCES = %D%/cycle.c preload/cycle.c preload/preload.h tests/tap/basic.c tests/tap/basic.h
%C%_cycle_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS)
%C%_cycle_LDADD = lib/libvmmx.la $(PTHREAD_LIBS)
%C%_cycle_LDFLAGS = $(AM_LDFLAGS) -no-install
TESTS += %D%/cycle

# A program idle between phases whose memory ctl.sh sleeps and wakes from outside.
check_PROGRAMS += %D%/sleepclient
%C%_sleepclient_SOURCES = %D%/sleepclient.c
%C%_sleepclient_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS)
%C%_sleepclient_LDADD = %D%/libvmmxfakecuda.la lib/libvmmx.la $(PTHREAD_LIBS)
%C%_sleepclient_LDFLAGS = $(AM_LDFLAGS) -no-install

TESTS += %D%/hooks.sh %D%/run.sh %D%/lookup.sh %D%/lookups.sh %D%/launches.sh %D%/ctl.sh
EXTRA_DIST += %D%/hooks.sh %D%/run.sh %D%/lookup.sh %D%/lookups.sh %D%/launches.sh %D%/env.sh \
	%D%/fakecuda.map %D%/ctl.sh
# CUDA graphs under the launch watch (launchclient's graph modes).
TESTS += %D%/graphs.sh
EXTRA_DIST += %D%/graphs.sh
# The same with PyTorch on the GPU machine, from a built tree (docs/PRELOAD.md).
EXTRA_DIST += %D%/graph_gpu.sh
# The preset's table in docs/PERFORMANCE.md, on the GPU machine from a built tree.
EXTRA_DIST += %D%/preset_gpu.sh
# GPU programs, run by hand on the GPU machine (docs/PRELOAD.md has the commands).
# Sleep and wake from outside on the GPU machine (docs/PRELOAD.md has the command).
EXTRA_DIST += %D%/ctl_gpu.sh %D%/ctl_torch.py %D%/wait_for.sh
EXTRA_DIST += docs/PRELOAD.md %D%/gpu_fill.cu %D%/alloc_bench.cu %D%/launch_bench.cu %D%/bench_time.h %D%/fork_threads.cu %D%/torch_chain.py %D%/cupy_fill.py %D%/cupy_pointers.py %D%/gpu.sh
# Unmodified JAX, Triton and numba-cuda past a device limit, and numba-cuda's
# own driver tests, on the GPU machine from a built tree (docs/PRELOAD.md).
EXTRA_DIST += %D%/frameworks.sh %D%/numba_suite.sh %D%/frameworks/common.py \
	%D%/frameworks/compare.py %D%/frameworks/hold.py %D%/frameworks/jax_mlp.py \
	%D%/frameworks/triton_kernel.py %D%/frameworks/numba_kernel.py \
	%D%/numba_shim/filecheck/__init__.py %D%/numba_shim/plugin/numba_fixtures.py
