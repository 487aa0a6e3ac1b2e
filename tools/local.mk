# SPDX-License-Identifier: MIT
bin_PROGRAMS += %D%/vmmx-demo
%C%_vmmx_demo_SOURCES = %D%/vmmx-demo.c
%C%_vmmx_demo_LDADD = lib/libvmmx.la
bin_PROGRAMS += %D%/vmmx-info
%C%_vmmx_info_SOURCES = %D%/vmmx-info.c
%C%_vmmx_info_LDADD = lib/libvmmx.la

# Experiment tools: GPU kernels (kernels.cu, embedded when nvcc is there),
# the driver plumbing and sim stand-ins (gpu.c), the PNG charts (plot.c).
bin_PROGRAMS += %D%/vmmx-place %D%/vmmx-bench
TOOLS_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_builddir)/tools
if HAVE_CUDA
TOOLS_CPPFLAGS += $(CUDA_CPPFLAGS)
endif
%C%_vmmx_place_SOURCES = %D%/vmmx-place.c %D%/gpu.c %D%/gpu.h %D%/plot.c %D%/plot.h
%C%_vmmx_place_CPPFLAGS = $(TOOLS_CPPFLAGS)
%C%_vmmx_place_LDADD = lib/libvmmx.la -lm
%C%_vmmx_bench_SOURCES = %D%/vmmx-bench.c %D%/gpu.c %D%/gpu.h %D%/plot.c %D%/plot.h
%C%_vmmx_bench_CPPFLAGS = $(TOOLS_CPPFLAGS)
%C%_vmmx_bench_LDADD = lib/libvmmx.la -lm
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
