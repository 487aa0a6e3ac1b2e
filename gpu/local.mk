# SPDX-License-Identifier: MIT
# The one GPU client of the tools and the tests (client.c over the driver
# door vmm/cudaload.c) and the one kernel set (kernels.cu, its data patterns
# in pattern.h): nvcc builds a fatbin, bin2c embeds it in the client; built
# without nvcc, the client says the kernels are not there.  A noinst
# library: vmmx-place, vmmx-bench and the tests' TAP library link it.
noinst_LTLIBRARIES += %D%/libvmmx_gpu.la
%C%_libvmmx_gpu_la_SOURCES = %D%/client.c %D%/client.h %D%/pattern.h
%C%_libvmmx_gpu_la_CPPFLAGS = $(AM_CPPFLAGS)
%C%_libvmmx_gpu_la_LIBADD = $(CUDALOAD_LIBS)
if HAVE_CUDA
%C%_libvmmx_gpu_la_CPPFLAGS += $(CUDA_CPPFLAGS)
endif
EXTRA_DIST += %D%/kernels.cu
if HAVE_NVCC
nodist_%C%_libvmmx_gpu_la_SOURCES = %D%/kernels_fatbin.h
BUILT_SOURCES += %D%/kernels_fatbin.h
CLEANFILES += %D%/kernels_fatbin.h %D%/kernels.fatbin
%D%/kernels.fatbin: %D%/kernels.cu %D%/pattern.h
	$(AM_V_GEN)$(MKDIR_P) %D% && $(NVCC) -fatbin $(NVCC_ARCH) -I$(srcdir) -o $@ $(srcdir)/%D%/kernels.cu
# the client includes it: built before it even by a make of one target (CI's TSan step)
$(%C%_libvmmx_gpu_la_OBJECTS): %D%/kernels_fatbin.h
%D%/kernels_fatbin.h: %D%/kernels.fatbin
	$(AM_V_GEN)$(BIN2C) --const --name vmmx_gpu_kernels_fatbin --type longlong %D%/kernels.fatbin > $@
endif
