# SPDX-License-Identifier: MIT
# The driver layer: a noinst library linked into libvmmx (and into tests).
noinst_LTLIBRARIES += %D%/libvmm.la
%C%_libvmm_la_SOURCES = %D%/vmm.h %D%/vmm.c %D%/sim.c
%C%_libvmm_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden $(PTHREAD_CFLAGS)
# CUDA_CPPFLAGS is empty when configure found no CUDA headers.
%C%_libvmm_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
if HAVE_CUDA
%C%_libvmm_la_SOURCES += %D%/cuda.c
endif
