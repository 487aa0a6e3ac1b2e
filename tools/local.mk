# SPDX-License-Identifier: MIT
# The tools: one file per tool (vmmx-bench and vmmx-place split further by
# section and concern: bench-*.c, place-*.c), plus what they share: the
# results model and its emitters (report.c), the option parsing (opts.c),
# opening a context with each error printed once (ctx.c), the GPU side of
# the experiments (gpu.h: workload.c, util.c, and gpu.c + gpu-alloc.c over
# the one GPU client gpu/client.c, or gpu-none.c) and the one kernel set,
# gpu/kernels.cu.
TOOLS_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_builddir)/tools -DVMMX_BINDIR='"$(bindir)"'
TOOLS_REPORT = %D%/report.c %D%/report.h
TOOLS_STDOUT = %D%/stdout.c %D%/stdout.h %D%/ctx.c %D%/ctx.h
TOOLS_OPTS = %D%/opts.c %D%/opts.h $(TOOLS_STDOUT)
bin_PROGRAMS += %D%/vmmx-demo
%C%_vmmx_demo_SOURCES = %D%/vmmx-demo.c $(TOOLS_STDOUT)
%C%_vmmx_demo_LDADD = lib/libvmmx.la
bin_PROGRAMS += %D%/vmmx-info
%C%_vmmx_info_SOURCES = %D%/vmmx-info.c $(TOOLS_REPORT) $(TOOLS_OPTS)
%C%_vmmx_info_CPPFLAGS = $(TOOLS_CPPFLAGS)
%C%_vmmx_info_LDADD = lib/libvmmx.la lib/libvmmx_json.la -lm

# Experiment tools: the GPU client and its kernels are gpu/libvmmx_gpu.la.
# The GPU side by concern: workloads and engine, the cuda client (or its
# stand-in without CUDA headers), and the error slot, clock and formats.
bin_PROGRAMS += %D%/vmmx-place %D%/vmmx-bench
TOOLS_GPU = %D%/gpu.h %D%/util.c %D%/workload.c
if HAVE_CUDA
TOOLS_CPPFLAGS += $(CUDA_CPPFLAGS)
TOOLS_GPU += %D%/gpu.c %D%/gpu-alloc.c %D%/gpu-cuda.h
else
TOOLS_GPU += %D%/gpu-none.c
endif
# --replay reads the trace with the strict JSON reader the tests use.
%C%_vmmx_place_SOURCES = %D%/vmmx-place.c %D%/place.h %D%/place-window.c \
	%D%/place-report.c %D%/place-replay.c tests/tap/json.c tests/tap/json.h \
	$(TOOLS_GPU) $(TOOLS_REPORT) $(TOOLS_OPTS)
%C%_vmmx_place_CPPFLAGS = $(TOOLS_CPPFLAGS)
%C%_vmmx_place_LDADD = lib/libvmmx.la lib/libvmmx_json.la gpu/libvmmx_gpu.la $(CUDALOAD_LIBS) -lm
%C%_vmmx_bench_SOURCES = %D%/vmmx-bench.c %D%/bench.h %D%/bench-ops.c \
	%D%/bench-grow.c %D%/bench-doubling.c %D%/bench-shrink.c %D%/bench-copy.c \
	%D%/bench-stream.c %D%/bench-migrate.c %D%/bench-sleep.c $(TOOLS_GPU) $(TOOLS_REPORT) $(TOOLS_OPTS)
%C%_vmmx_bench_CPPFLAGS = $(TOOLS_CPPFLAGS)
%C%_vmmx_bench_LDADD = lib/libvmmx.la lib/libvmmx_json.la gpu/libvmmx_gpu.la $(CUDALOAD_LIBS) -lm
EXTRA_DIST += docs/PERFORMANCE.md

# vmmx-plot: draws any tool's JSON charts with matplotlib (python/vmmx_tools/plot.py,
# installed with the vmmx package into $(pythondir); the wrapper finds it there).
# Two copies: the build tree's (tools/vmmx-plot, which the tools and tests run)
# also looks in the source tree; the installed one (tools/installed/vmmx-plot)
# only in $(pythondir) and PYTHONPATH.
noinst_SCRIPTS += %D%/vmmx-plot
bin_SCRIPTS += %D%/installed/vmmx-plot
CLEANFILES += %D%/vmmx-plot %D%/installed/vmmx-plot
EXTRA_DIST += %D%/vmmx-plot.in
%D%/vmmx-plot: %D%/vmmx-plot.in Makefile
	$(AM_V_GEN)$(MKDIR_P) %D% && sed -e 's|@pythondir[@]|$(pythondir)|g' \
		-e 's|@VERSION[@]|$(VERSION)|g' \
		-e 's|@srcpythondir[@]|$(abs_top_srcdir)/python|g' \
		$(srcdir)/%D%/vmmx-plot.in > $@.tmp && chmod +x $@.tmp && mv $@.tmp $@
%D%/installed/vmmx-plot: %D%/vmmx-plot.in Makefile
	$(AM_V_GEN)$(MKDIR_P) %D%/installed && sed -e 's|@pythondir[@]|$(pythondir)|g' \
		-e 's|@VERSION[@]|$(VERSION)|g' -e 's|@srcpythondir[@]||g' \
		$(srcdir)/%D%/vmmx-plot.in > $@.tmp && chmod +x $@.tmp && mv $@.tmp $@
