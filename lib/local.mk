# SPDX-License-Identifier: MIT
# libvmmx: a noinst core (linked whole into the tests, for white-box access)
# and the installed library, which exports vmmx_* only.
noinst_LTLIBRARIES += %D%/libvmmx_core.la
%C%_libvmmx_core_la_SOURCES = \
	%D%/internal.h \
	%D%/error.c \
	%D%/log.c \
	%D%/size.c \
	%D%/config.c \
	%D%/ctx.c \
	%D%/buf.c \
	%D%/place.c \
	%D%/copy.c \
	%D%/stats.c
%C%_libvmmx_core_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden $(URCU_CFLAGS) $(PTHREAD_CFLAGS)
%C%_libvmmx_core_la_LIBADD = vmm/libvmm.la $(URCU_LIBS) $(PTHREAD_LIBS)

lib_LTLIBRARIES += %D%/libvmmx.la
%C%_libvmmx_la_SOURCES = %D%/version.c
%C%_libvmmx_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
%C%_libvmmx_la_LIBADD = %D%/libvmmx_core.la
%C%_libvmmx_la_LDFLAGS = $(AM_LDFLAGS) -version-info $(VMMX_LT_VERSION) \
	-export-symbols-regex '^vmmx_[a-z]'
