# SPDX-License-Identifier: MIT
# The driver layer: a noinst library linked into libvmmx (and into tests).
noinst_LTLIBRARIES += %D%/libvmm.la
%C%_libvmm_la_SOURCES = %D%/vmm.h %D%/vmm.c %D%/sim.c
%C%_libvmm_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden $(PTHREAD_CFLAGS)
# CUDA_CPPFLAGS is empty when configure found no CUDA headers.
%C%_libvmm_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
# CUDALOAD_LIBS: the one door to libcuda.so.1 (cudaload.h), a library of its
# own because the tools and the tests' TAP library link it too, while
# libvmmx exports none of it.  Empty without CUDA headers.
CUDALOAD_LIBS =
EXTRA_DIST += %D%/cudaload.h %D%/cudaload.c %D%/fdwrite.h
if HAVE_CUDA
noinst_LTLIBRARIES += %D%/libcudaload.la
%C%_libcudaload_la_SOURCES = %D%/cudaload.h %D%/cudaload.c
%C%_libcudaload_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden $(PTHREAD_CFLAGS)
%C%_libcudaload_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
CUDALOAD_LIBS += %D%/libcudaload.la
%C%_libvmm_la_SOURCES += %D%/cuda.c
%C%_libvmm_la_LIBADD = %D%/libcudaload.la
endif
