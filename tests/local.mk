# SPDX-License-Identifier: MIT
# TAP tests, laid out like the sources.  They run on VMMX_BACKEND (sim when
# unset); GPU-only tests skip_all without a GPU.
LOG_DRIVER = env AM_TAP_AWK='$(AWK)' $(SHELL) $(top_srcdir)/build-aux/tap-driver.sh
TEST_EXTENSIONS = .sh
SH_LOG_DRIVER = $(LOG_DRIVER)
SH_LOG_COMPILER = $(SHELL)
AM_TESTS_ENVIRONMENT = \
	: $${VMMX_BACKEND:=sim}; export VMMX_BACKEND; \
	top_builddir='$(abs_top_builddir)'; top_srcdir='$(abs_top_srcdir)'; \
	export top_builddir top_srcdir; NM='$(NM)'; export NM;

check_LTLIBRARIES += %D%/tap/libtap.la
%C%_tap_libtap_la_SOURCES = %D%/tap/basic.h %D%/tap/basic.c %D%/tap/vmmx_test.h %D%/tap/vmmx_test.c \
	%D%/tap/cuda.h %D%/tap/cuda.c
%C%_tap_libtap_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/lib
%C%_tap_libtap_la_CFLAGS = $(AM_CFLAGS) $(URCU_CFLAGS)
if HAVE_CUDA
%C%_tap_libtap_la_CPPFLAGS += $(CUDA_CPPFLAGS)
endif

# White-box tests link the core statically.
TEST_LDADD = %D%/tap/libtap.la lib/libvmmx_core.la $(URCU_LIBS) $(PTHREAD_LIBS)
TEST_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/lib $(URCU_CFLAGS)

vmmx_c_tests = \
	%D%/vmm/sim \
	%D%/vmm/fault \
	%D%/lib/size \
	%D%/lib/error \
	%D%/lib/config \
	%D%/lib/buf \
	%D%/lib/limits \
	%D%/lib/fault_sweep \
	%D%/lib/concurrency \
	%D%/lib/memcpy \
	%D%/lib/lookup \
	%D%/gpu/mixed_kernel

check_PROGRAMS += $(vmmx_c_tests) %D%/api/cxx
TESTS += $(vmmx_c_tests) %D%/api/cxx %D%/api/exports.sh
EXTRA_DIST += %D%/api/exports.sh

%C%_vmm_sim_LDADD = $(TEST_LDADD)
%C%_vmm_sim_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_vmm_fault_LDADD = $(TEST_LDADD)
%C%_vmm_fault_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_size_LDADD = $(TEST_LDADD)
%C%_lib_size_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_error_LDADD = $(TEST_LDADD)
%C%_lib_error_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_config_LDADD = $(TEST_LDADD)
%C%_lib_config_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_buf_LDADD = $(TEST_LDADD)
%C%_lib_buf_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_limits_LDADD = $(TEST_LDADD)
%C%_lib_limits_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_fault_sweep_LDADD = $(TEST_LDADD)
%C%_lib_fault_sweep_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_concurrency_LDADD = $(TEST_LDADD)
%C%_lib_concurrency_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_memcpy_LDADD = $(TEST_LDADD)
%C%_lib_memcpy_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_lookup_LDADD = $(TEST_LDADD)
%C%_lib_lookup_CPPFLAGS = $(TEST_CPPFLAGS)

# GPU kernels: nvcc builds a fatbin, bin2c embeds it; without nvcc the test skips.
%C%_gpu_mixed_kernel_SOURCES = %D%/gpu/mixed_kernel.c %D%/gpu/hash.h
%C%_gpu_mixed_kernel_LDADD = $(TEST_LDADD)
%C%_gpu_mixed_kernel_CPPFLAGS = $(TEST_CPPFLAGS) -I%D%/gpu
EXTRA_DIST += %D%/gpu/kernels.cu
if HAVE_NVCC
nodist_%C%_gpu_mixed_kernel_SOURCES = %D%/gpu/kernels_fatbin.h
BUILT_SOURCES += %D%/gpu/kernels_fatbin.h
CLEANFILES += %D%/gpu/kernels_fatbin.h %D%/gpu/kernels.fatbin
%D%/gpu/kernels.fatbin: %D%/gpu/kernels.cu
	$(AM_V_GEN)$(MKDIR_P) %D%/gpu && $(NVCC) -fatbin $(NVCC_ARCH) -o $@ $(srcdir)/%D%/gpu/kernels.cu
%D%/gpu/kernels_fatbin.h: %D%/gpu/kernels.fatbin
	$(AM_V_GEN)$(BIN2C) --const --name vmmx_test_kernels_fatbin --type longlong %D%/gpu/kernels.fatbin > $@
endif

# vmmx.h must compile as C++ and as strict C99.
%C%_api_cxx_SOURCES = %D%/api/cxx.cc
%C%_api_cxx_LDADD = %D%/tap/libtap.la lib/libvmmx.la
%C%_api_cxx_CPPFLAGS = $(AM_CPPFLAGS)
