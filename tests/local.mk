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
	%D%/tap/cuda.h %D%/tap/cuda.c %D%/tap/json.h %D%/tap/json.c \
	%D%/tap/leaks.h %D%/tap/leaks.c
%C%_tap_libtap_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/lib
%C%_tap_libtap_la_CFLAGS = $(AM_CFLAGS) $(URCU_CFLAGS)
%C%_tap_libtap_la_LIBADD = lib/libvmmx_json.la gpu/libvmmx_gpu.la
if HAVE_CUDA
%C%_tap_libtap_la_CPPFLAGS += $(CUDA_CPPFLAGS)
endif

# White-box tests link the core statically.
TEST_LDADD = %D%/tap/libtap.la lib/libvmmx_core.la $(URCU_LIBS) $(ZLIB_LIBS) $(PTHREAD_LIBS)
TEST_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/lib $(URCU_CFLAGS)

vmmx_c_tests = \
	%D%/vmm/sim \
	%D%/vmm/fault \
	%D%/vmm/cuda \
	%D%/lib/size \
	%D%/lib/error \
	%D%/lib/config \
	%D%/lib/buf \
	%D%/lib/shrink \
	%D%/lib/limits \
	%D%/lib/fault_sweep \
	%D%/lib/concurrency \
	%D%/lib/prefetch_destroy \
	%D%/lib/memcpy \
	%D%/lib/lookup \
	%D%/lib/info \
	%D%/lib/cache \
	%D%/lib/trace \
	%D%/lib/abi \
	%D%/lib/place_mt \
	%D%/lib/devices \
	%D%/policies/loader \
	%D%/policies/loader_path \
	%D%/policies/shipped \
	%D%/policies/example \
	%D%/gpu/mixed_kernel \
	%D%/gpu/fallback_kernel \
	%D%/lib/host \
	%D%/lib/migrate \
	%D%/lib/sleep \
	%D%/lib/readmostly \
	%D%/policies/lru \
	%D%/gpu/migrate_kernel \
	%D%/gpu/kept_range_kernel \
	%D%/gpu/headroom \
	%D%/gpu/cpu_grant \
	%D%/lib/foreign \
	%D%/lib/fork \
	%D%/lib/undo \
	%D%/lib/kept_range \
	%D%/lib/shrink_pairs \
	%D%/lib/longrun \
	%D%/lib/alloc \
	%D%/lib/alloc_fork \
	%D%/lib/alloc_badstream \
	%D%/lib/prefetch \
	%D%/lib/copy_range \
	%D%/lib/log \
	%D%/lib/trace_open \
	%D%/vmm/sim_world \
	%D%/lib/numa \
	%D%/vmm/event \
	%D%/lib/event \
	%D%/lib/room \
	%D%/lib/verified \
	%D%/lib/park \
	%D%/lib/sleep_parked \
	%D%/lib/destroy_reclaim \
	%D%/lib/swap \
	%D%/lib/drivertime \
	%D%/gpu/peer_spill

check_PROGRAMS += $(vmmx_c_tests) %D%/api/cxx
TESTS += $(vmmx_c_tests) %D%/api/cxx %D%/api/exports.sh
EXTRA_DIST += %D%/api/exports.sh %D%/tools/tap.sh
TESTS += %D%/tools/vmmx-info.sh
EXTRA_DIST += %D%/tools/vmmx-info.sh
# The cuda backend's checksum kernel through ptxas (skips without the toolkit).
TESTS += %D%/vmm/ptx.sh
EXTRA_DIST += %D%/vmm/ptx.sh
# The man pages vmmx(3) and vmmx(7) against the code (.ci/check-man).
TESTS += %D%/docs/check-man.sh
EXTRA_DIST += %D%/docs/check-man.sh
# The Python package under pytest, as TAP (skips without pytest).
TESTS += %D%/python/pytest.sh
EXTRA_DIST += %D%/python/pytest.sh

%C%_vmm_sim_LDADD = $(TEST_LDADD)
%C%_vmm_sim_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_vmm_fault_LDADD = $(TEST_LDADD)
%C%_vmm_fault_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_vmm_cuda_LDADD = $(TEST_LDADD)
%C%_vmm_cuda_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_size_LDADD = $(TEST_LDADD)
%C%_lib_size_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_error_LDADD = $(TEST_LDADD)
%C%_lib_error_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_config_LDADD = $(TEST_LDADD)
%C%_lib_config_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_buf_LDADD = $(TEST_LDADD)
%C%_lib_buf_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_shrink_LDADD = $(TEST_LDADD)
%C%_lib_shrink_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_limits_LDADD = $(TEST_LDADD)
%C%_lib_limits_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_fault_sweep_LDADD = $(TEST_LDADD)
%C%_lib_fault_sweep_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_concurrency_LDADD = $(TEST_LDADD)
%C%_lib_concurrency_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_prefetch_destroy_LDADD = $(TEST_LDADD)
%C%_lib_prefetch_destroy_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_memcpy_LDADD = $(TEST_LDADD)
%C%_lib_memcpy_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_copy_range_LDADD = $(TEST_LDADD)
%C%_lib_copy_range_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_log_LDADD = $(TEST_LDADD)
%C%_lib_log_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_trace_open_LDADD = $(TEST_LDADD)
%C%_lib_trace_open_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_vmm_sim_world_LDADD = $(TEST_LDADD)
%C%_vmm_sim_world_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_numa_LDADD = $(TEST_LDADD)
%C%_lib_numa_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_lookup_LDADD = $(TEST_LDADD)
%C%_lib_lookup_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_info_LDADD = $(TEST_LDADD)
%C%_lib_info_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_cache_LDADD = $(TEST_LDADD)
%C%_lib_cache_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_trace_LDADD = $(TEST_LDADD)
%C%_lib_trace_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_abi_LDADD = $(TEST_LDADD)
%C%_lib_abi_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_place_mt_LDADD = $(TEST_LDADD)
%C%_lib_place_mt_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_devices_LDADD = $(TEST_LDADD)
%C%_lib_devices_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_policies_loader_LDADD = $(TEST_LDADD)
%C%_policies_loader_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_policies_loader_path_LDADD = $(TEST_LDADD)
%C%_policies_loader_path_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_policies_shipped_LDADD = $(TEST_LDADD)
%C%_policies_shipped_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_policies_example_LDADD = $(TEST_LDADD)
%C%_policies_example_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_host_LDADD = $(TEST_LDADD)
%C%_lib_host_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_migrate_LDADD = $(TEST_LDADD)
%C%_lib_migrate_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_sleep_LDADD = $(TEST_LDADD)
%C%_lib_sleep_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_readmostly_LDADD = $(TEST_LDADD)
%C%_lib_readmostly_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_alloc_LDADD = $(TEST_LDADD)
%C%_lib_alloc_fork_LDADD = $(TEST_LDADD)
%C%_lib_alloc_badstream_LDADD = $(TEST_LDADD)
%C%_lib_alloc_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_alloc_fork_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_alloc_badstream_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_prefetch_LDADD = $(TEST_LDADD)
%C%_lib_prefetch_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_vmm_event_LDADD = $(TEST_LDADD)
%C%_vmm_event_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_event_LDADD = $(TEST_LDADD)
%C%_lib_event_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_room_LDADD = $(TEST_LDADD)
%C%_lib_room_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_verified_LDADD = $(TEST_LDADD)
%C%_lib_verified_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_park_LDADD = $(TEST_LDADD)
%C%_lib_park_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_sleep_parked_LDADD = $(TEST_LDADD)
%C%_lib_sleep_parked_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_destroy_reclaim_LDADD = $(TEST_LDADD)
%C%_lib_destroy_reclaim_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_swap_LDADD = $(TEST_LDADD)
%C%_lib_swap_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_drivertime_LDADD = $(TEST_LDADD)
%C%_lib_drivertime_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_policies_lru_LDADD = $(TEST_LDADD)
%C%_lib_foreign_LDADD = $(TEST_LDADD)
%C%_lib_fork_LDADD = $(TEST_LDADD)
%C%_lib_longrun_LDADD = $(TEST_LDADD)
%C%_lib_longrun_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_undo_LDADD = $(TEST_LDADD)
%C%_lib_undo_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_kept_range_LDADD = $(TEST_LDADD)
%C%_lib_kept_range_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_shrink_pairs_LDADD = $(TEST_LDADD)
%C%_lib_shrink_pairs_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_fork_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_lib_foreign_CPPFLAGS = $(TEST_CPPFLAGS)
%C%_policies_lru_CPPFLAGS = $(TEST_CPPFLAGS)

# Plugins for the policy tests, loadable modules in %D%/policies/.libs (make
# check builds check_LTLIBRARIES before it runs the tests): the fake ones of
# the loader test, one variant of fake.c each, and the documentation's example.
# -rpath makes libtool build them shared although they are never installed.
TEST_POLICY_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared -rpath /nowhere -no-undefined
TEST_POLICY_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
check_LTLIBRARIES += \
	%D%/policies/vmmx_policy_fake_ok.la \
	%D%/policies/vmmx_policy_fake_major.la \
	%D%/policies/vmmx_policy_fake_small.la \
	%D%/policies/vmmx_policy_fake_noentry.la \
	%D%/policies/vmmx_policy_fake_nocb.la \
	%D%/policies/vmmx_policy_fake_name.la \
	%D%/policies/vmmx_policy_fake_null.la \
	%D%/policies/vmmx_policy_fake_initfail.la \
	%D%/policies/vmmx_policy_fake_impostor.la \
	%D%/policies/vmmx_policy_coinflip.la
%C%_policies_vmmx_policy_fake_ok_la_SOURCES = %D%/policies/fake.c
%C%_policies_vmmx_policy_fake_ok_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_OK
%C%_policies_vmmx_policy_fake_ok_la_CFLAGS = $(TEST_POLICY_CFLAGS)
%C%_policies_vmmx_policy_fake_ok_la_LDFLAGS = $(TEST_POLICY_LDFLAGS)
%C%_policies_vmmx_policy_fake_major_la_SOURCES = %D%/policies/fake.c
%C%_policies_vmmx_policy_fake_major_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_MAJOR
%C%_policies_vmmx_policy_fake_major_la_CFLAGS = $(TEST_POLICY_CFLAGS)
%C%_policies_vmmx_policy_fake_major_la_LDFLAGS = $(TEST_POLICY_LDFLAGS)
%C%_policies_vmmx_policy_fake_small_la_SOURCES = %D%/policies/fake.c
%C%_policies_vmmx_policy_fake_small_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_SMALL
%C%_policies_vmmx_policy_fake_small_la_CFLAGS = $(TEST_POLICY_CFLAGS)
%C%_policies_vmmx_policy_fake_small_la_LDFLAGS = $(TEST_POLICY_LDFLAGS)
%C%_policies_vmmx_policy_fake_noentry_la_SOURCES = %D%/policies/fake.c
%C%_policies_vmmx_policy_fake_noentry_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NOENTRY
%C%_policies_vmmx_policy_fake_noentry_la_CFLAGS = $(TEST_POLICY_CFLAGS)
%C%_policies_vmmx_policy_fake_noentry_la_LDFLAGS = $(TEST_POLICY_LDFLAGS)
%C%_policies_vmmx_policy_fake_nocb_la_SOURCES = %D%/policies/fake.c
%C%_policies_vmmx_policy_fake_nocb_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NOCB
%C%_policies_vmmx_policy_fake_nocb_la_CFLAGS = $(TEST_POLICY_CFLAGS)
%C%_policies_vmmx_policy_fake_nocb_la_LDFLAGS = $(TEST_POLICY_LDFLAGS)
%C%_policies_vmmx_policy_fake_name_la_SOURCES = %D%/policies/fake.c
%C%_policies_vmmx_policy_fake_name_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME
%C%_policies_vmmx_policy_fake_name_la_CFLAGS = $(TEST_POLICY_CFLAGS)
%C%_policies_vmmx_policy_fake_name_la_LDFLAGS = $(TEST_POLICY_LDFLAGS)
%C%_policies_vmmx_policy_fake_null_la_SOURCES = %D%/policies/fake.c
%C%_policies_vmmx_policy_fake_null_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NULL
%C%_policies_vmmx_policy_fake_null_la_CFLAGS = $(TEST_POLICY_CFLAGS)
%C%_policies_vmmx_policy_fake_null_la_LDFLAGS = $(TEST_POLICY_LDFLAGS)
%C%_policies_vmmx_policy_fake_initfail_la_SOURCES = %D%/policies/fake.c
%C%_policies_vmmx_policy_fake_initfail_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_INITFAIL
%C%_policies_vmmx_policy_fake_initfail_la_CFLAGS = $(TEST_POLICY_CFLAGS)
%C%_policies_vmmx_policy_fake_initfail_la_LDFLAGS = $(TEST_POLICY_LDFLAGS)
%C%_policies_vmmx_policy_fake_impostor_la_SOURCES = %D%/policies/fake.c
%C%_policies_vmmx_policy_fake_impostor_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_IMPOSTOR
%C%_policies_vmmx_policy_fake_impostor_la_CFLAGS = $(TEST_POLICY_CFLAGS)
%C%_policies_vmmx_policy_fake_impostor_la_LDFLAGS = $(TEST_POLICY_LDFLAGS)
%C%_policies_vmmx_policy_coinflip_la_SOURCES = docs/examples/coinflip.c
%C%_policies_vmmx_policy_coinflip_la_CFLAGS = $(TEST_POLICY_CFLAGS)
%C%_policies_vmmx_policy_coinflip_la_LDFLAGS = $(TEST_POLICY_LDFLAGS)

# GPU kernels: the one kernel set, in the GPU client (gpu/); without nvcc the tests skip.
%C%_gpu_mixed_kernel_SOURCES = %D%/gpu/mixed_kernel.c %D%/gpu/check.h
%C%_gpu_mixed_kernel_LDADD = $(TEST_LDADD)
%C%_gpu_mixed_kernel_CPPFLAGS = $(TEST_CPPFLAGS) -I%D%/gpu
%C%_gpu_migrate_kernel_SOURCES = %D%/gpu/migrate_kernel.c %D%/gpu/check.h
%C%_gpu_migrate_kernel_LDADD = $(TEST_LDADD)
%C%_gpu_migrate_kernel_CPPFLAGS = $(TEST_CPPFLAGS) -I%D%/gpu
%C%_gpu_kept_range_kernel_SOURCES = %D%/gpu/kept_range_kernel.c %D%/gpu/check.h
%C%_gpu_kept_range_kernel_LDADD = $(TEST_LDADD)
%C%_gpu_kept_range_kernel_CPPFLAGS = $(TEST_CPPFLAGS) -I%D%/gpu
%C%_gpu_fallback_kernel_SOURCES = %D%/gpu/fallback_kernel.c
%C%_gpu_headroom_SOURCES = %D%/gpu/headroom.c
%C%_gpu_cpu_grant_SOURCES = %D%/gpu/cpu_grant.c %D%/gpu/check.h
%C%_gpu_cpu_grant_LDADD = $(TEST_LDADD)
%C%_gpu_cpu_grant_CPPFLAGS = $(TEST_CPPFLAGS) -I%D%/gpu
%C%_gpu_peer_spill_SOURCES = %D%/gpu/peer_spill.c %D%/gpu/check.h
%C%_gpu_peer_spill_LDADD = $(TEST_LDADD)
%C%_gpu_peer_spill_CPPFLAGS = $(TEST_CPPFLAGS) -I%D%/gpu
%C%_gpu_headroom_LDADD = $(TEST_LDADD)
%C%_gpu_headroom_CPPFLAGS = $(TEST_CPPFLAGS) -I%D%/gpu
%C%_gpu_fallback_kernel_LDADD = $(TEST_LDADD)
%C%_gpu_fallback_kernel_CPPFLAGS = $(TEST_CPPFLAGS) -I%D%/gpu

# The tools on sim (shell), and vmmx-plot (skipped without matplotlib).
TESTS += %D%/tools/vmmx-place.sh %D%/tools/vmmx-bench.sh %D%/tools/vmmx-plot.sh
EXTRA_DIST += %D%/tools/vmmx-place.sh %D%/tools/vmmx-bench.sh %D%/tools/vmmx-plot.sh
# vmmx-place --replay: a hand-made trace worked out by hand, and one recorded on the sim.
TESTS += %D%/tools/vmmx-place-replay.sh
EXTRA_DIST += %D%/tools/vmmx-place-replay.sh %D%/tools/replay-abc.jsonl %D%/tools/replay-places.jsonl \
	%D%/tools/replay-freq.jsonl \
	%D%/tools/replay-spread.jsonl %D%/tools/replay-spread-extra.jsonl
# vmmx-demo; vmmx-run's checks and --report-file (the interposer's own tests are tests/preload/).
TESTS += %D%/tools/vmmx-demo.sh %D%/tools/vmmx-run.sh
EXTRA_DIST += %D%/tools/vmmx-demo.sh %D%/tools/vmmx-run.sh
# Every tool: --version, and each error printed once.
TESTS += %D%/tools/version.sh %D%/tools/errors-once.sh
EXTRA_DIST += %D%/tools/version.sh %D%/tools/errors-once.sh

# vmmx.h must compile as C++ and as strict C99.
%C%_api_cxx_SOURCES = %D%/api/cxx.cc
%C%_api_cxx_LDADD = %D%/tap/libtap.la lib/libvmmx.la
%C%_api_cxx_CPPFLAGS = $(AM_CPPFLAGS)
