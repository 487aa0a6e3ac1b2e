# SPDX-License-Identifier: MIT
# The tools: one file per tool, plus what they share: the results model and
# its emitters (report.c), the option parsing (opts.c), the GPU side of the
# experiments (gpu.c, over the driver door vmm/cudaload.c) and their kernels
# (kernels.cu).
TOOLS_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_builddir)/tools -DVMMX_BINDIR='"$(bindir)"'
TOOLS_REPORT = %D%/report.c %D%/report.h
TOOLS_STDOUT = %D%/stdout.c %D%/stdout.h
TOOLS_OPTS = %D%/opts.c %D%/opts.h $(TOOLS_STDOUT)
bin_PROGRAMS += %D%/vmmx-demo
%C%_vmmx_demo_SOURCES = %D%/vmmx-demo.c $(TOOLS_STDOUT)
%C%_vmmx_demo_LDADD = lib/libvmmx.la
bin_PROGRAMS += %D%/vmmx-info
%C%_vmmx_info_SOURCES = %D%/vmmx-info.c $(TOOLS_REPORT) $(TOOLS_OPTS)
%C%_vmmx_info_CPPFLAGS = $(TOOLS_CPPFLAGS)
%C%_vmmx_info_LDADD = lib/libvmmx.la -lm

# Experiment tools: GPU kernels (kernels.cu, embedded when nvcc is there),
# the driver plumbing and sim stand-ins (gpu.c).
bin_PROGRAMS += %D%/vmmx-place %D%/vmmx-bench
if HAVE_CUDA
TOOLS_CPPFLAGS += $(CUDA_CPPFLAGS)
endif
%C%_vmmx_place_SOURCES = %D%/vmmx-place.c %D%/gpu.c %D%/gpu.h $(TOOLS_REPORT) \
	$(TOOLS_OPTS)
%C%_vmmx_place_CPPFLAGS = $(TOOLS_CPPFLAGS)
%C%_vmmx_place_LDADD = lib/libvmmx.la $(CUDALOAD_LIBS) -lm
%C%_vmmx_bench_SOURCES = %D%/vmmx-bench.c %D%/gpu.c %D%/gpu.h $(TOOLS_REPORT) \
	$(TOOLS_OPTS)
%C%_vmmx_bench_CPPFLAGS = $(TOOLS_CPPFLAGS)
%C%_vmmx_bench_LDADD = lib/libvmmx.la $(CUDALOAD_LIBS) -lm
EXTRA_DIST += %D%/kernels.cu docs/PERFORMANCE.md
if HAVE_NVCC
nodist_%C%_vmmx_place_SOURCES = %D%/kernels_fatbin.h
nodist_%C%_vmmx_bench_SOURCES = %D%/kernels_fatbin.h
BUILT_SOURCES += %D%/kernels_fatbin.h
CLEANFILES += %D%/kernels_fatbin.h %D%/kernels.fatbin
%D%/kernels.fatbin: %D%/kernels.cu %D%/gpu.h
	$(AM_V_GEN)$(MKDIR_P) %D% && $(NVCC) -fatbin $(NVCC_ARCH) -o $@ $(srcdir)/%D%/kernels.cu
%D%/kernels_fatbin.h: %D%/kernels.fatbin
	$(AM_V_GEN)$(BIN2C) --const --name vmmx_tool_kernels_fatbin --type longlong %D%/kernels.fatbin > $@
endif

# vmmx-plot: draws any tool's JSON charts with matplotlib (python/vmmx/plot.py,
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
		-e 's|@srcpythondir[@]|$(abs_top_srcdir)/python|g' \
		$(srcdir)/%D%/vmmx-plot.in > $@.tmp && chmod +x $@.tmp && mv $@.tmp $@
%D%/installed/vmmx-plot: %D%/vmmx-plot.in Makefile
	$(AM_V_GEN)$(MKDIR_P) %D%/installed && sed -e 's|@pythondir[@]|$(pythondir)|g' \
		-e 's|@srcpythondir[@]||g' \
		$(srcdir)/%D%/vmmx-plot.in > $@.tmp && chmod +x $@.tmp && mv $@.tmp $@
