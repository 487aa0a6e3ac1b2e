# SPDX-License-Identifier: MIT
# libvmmx-preload: the LD_PRELOAD interposer behind vmmx-run.  A module (no
# version: LD_PRELOAD names the file), exporting only the CUDA entry points it
# takes over, dlsym and dlvsym; everything else is hidden.
lib_LTLIBRARIES += %D%/libvmmx-preload.la
%C%_libvmmx_preload_la_SOURCES = \
	%D%/preload.h \
	%D%/hooks.c \
	%D%/copy.c \
	%D%/launch.c \
	%D%/graph.c \
	%D%/cycle.c \
	%D%/place.c \
	%D%/state.c \
	%D%/ctl.h \
	%D%/control.c
%C%_libvmmx_preload_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden $(PTHREAD_CFLAGS)
%C%_libvmmx_preload_la_LIBADD = %D%/libresolve.la lib/libvmmx.la $(PTHREAD_LIBS)
# dlsym() runs in every process the library is preloaded into, also while a
# sanitizer runtime starts and calls it, before its shadow memory exists: the
# lookups are built without sanitizer instrumentation (SAN_FLAGS left out).
noinst_LTLIBRARIES += %D%/libresolve.la
%C%_libresolve_la_SOURCES = %D%/resolve.c
%C%_libresolve_la_CFLAGS = -std=gnu11 $(WARN_CFLAGS) -fvisibility=hidden
%C%_libvmmx_preload_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared \
	-export-symbols-regex '^(cuda[A-Z]|cu[A-Z]|dlv?sym$$)'

# vmmx-run: validates its options, sets VMMX_* and LD_PRELOAD, execs the program.
bin_PROGRAMS += tools/vmmx-run
tools_vmmx_run_SOURCES = tools/vmmx-run.c preload/ctl.h
# The installed interposer, and the build tree's for a vmmx-run that runs from it.
tools_vmmx_run_CPPFLAGS = $(AM_CPPFLAGS) -DVMMX_PRELOAD_LIB='"$(libdir)/libvmmx-preload.so"' \
	-DVMMX_ABS_BUILDDIR='"$(abs_top_builddir)"' \
	-DVMMX_BUILD_PRELOAD_LIB='"$(abs_top_builddir)/preload/.libs/libvmmx-preload.so"'
# The driver door (vmm/cudaload.h), to count the devices its checks are made against.
tools_vmmx_run_LDADD = lib/libvmmx.la $(CUDALOAD_LIBS) $(PTHREAD_LIBS)
if HAVE_CUDA
tools_vmmx_run_CPPFLAGS += $(CUDA_CPPFLAGS)
endif
