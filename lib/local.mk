# SPDX-License-Identifier: MIT
# libvmmx: a noinst core (its files by layer, bottom up: docs/DESIGN.md) (linked whole into the tests, for white-box access)
# and the installed library, which exports vmmx_* only.

# The one JSON writer, a primitive with no dependency on the rest of lib/:
# libvmmx, the tools and the tests link it (hidden, so nothing leaves the .so).
noinst_LTLIBRARIES += %D%/libvmmx_json.la
%C%_libvmmx_json_la_SOURCES = %D%/json.c %D%/json.h
%C%_libvmmx_json_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden

noinst_LTLIBRARIES += %D%/libvmmx_core.la
%C%_libvmmx_core_la_SOURCES = \
	%D%/internal.h \
	%D%/internal/base.h \
	%D%/error.c \
	%D%/log.c \
	%D%/size.c \
	%D%/loc.c \
	%D%/config.c \
	%D%/internal/mem.h \
	%D%/room.c \
	%D%/defer.c \
	%D%/table.c \
	%D%/map.c \
	%D%/cache.c \
	%D%/hva.c \
	%D%/internal/obj.h \
	%D%/ctx.c \
	%D%/buf.c \
	%D%/pin.c \
	%D%/buflist.c \
	%D%/policy.c \
	%D%/builtin_device_first.c \
	%D%/builtin_device.c \
	%D%/builtin_host.c \
	%D%/trace.c \
	%D%/host.c \
	%D%/migrate.c \
	%D%/stream.c \
	%D%/event.c \
	%D%/shadow.c \
	%D%/evict.c \
	%D%/fork.c \
	%D%/internal/addr.h \
	%D%/lookup.c \
	%D%/copy.c \
	%D%/info.c \
	%D%/hmm.c \
	%D%/stats.c \
	%D%/prefetch.c \
	%D%/sleep.c \
	%D%/internal/alloc.h \
	%D%/alloc.c \
	%D%/alloc_frameworks.c
%C%_libvmmx_core_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden $(URCU_CFLAGS) $(ZLIB_CFLAGS) $(PTHREAD_CFLAGS)
# Where policies are installed, and where the build tree keeps them (used only
# when this library runs uninstalled from that tree: see lib/policy.c).
%C%_libvmmx_core_la_CPPFLAGS = $(AM_CPPFLAGS) \
	-DVMMX_POLICY_DIR='"$(pkglibdir)/policies"' \
	-DVMMX_ABS_BUILDDIR='"$(abs_top_builddir)"' \
	-DVMMX_BUILD_POLICY_DIR='"$(abs_top_builddir)/policies/.libs"' 
%C%_libvmmx_core_la_LIBADD = %D%/libvmmx_json.la vmm/libvmm.la $(URCU_LIBS) $(ZLIB_LIBS) $(PTHREAD_LIBS)

lib_LTLIBRARIES += %D%/libvmmx.la
%C%_libvmmx_la_SOURCES = %D%/version.c
%C%_libvmmx_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
%C%_libvmmx_la_LIBADD = %D%/libvmmx_core.la
%C%_libvmmx_la_LDFLAGS = $(AM_LDFLAGS) -version-info $(VMMX_LT_VERSION) \
	-export-symbols-regex '^vmmx_[a-z]'
