// SPDX-License-Identifier: MIT
/*
 * info.c - vmmx_device_info, vmmx_hmm_probe (through vmmx__hmm_probe_paths
 * with files written here, plain and gzip) and vmmx_policy_list (the build
 * tree's plugins, the built-ins, and a refused copy in a directory of our
 * own).
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "internal.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

/*
 * Kernel configurations compressed by Python's gzip module, one per kind of
 * deflate block: fixed Huffman codes (a short text), dynamic codes (a longer
 * one, with the FNAME header field set) and stored (level 0).  Each holds
 * "# CONFIG_DEVICE_PRIVATE is not set" and "CONFIG_HMM_MIRROR=y".
 */
static const unsigned char kconfig_gz_fixed[81] = {
	0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xff, 0x73, 0xf6,
	0xf7, 0x73, 0xf3, 0x74, 0x8f, 0x8f, 0xf2, 0xf7, 0x73, 0x8d, 0x77, 0x71,
	0x0d, 0xf3, 0x74, 0x76, 0xb5, 0xad, 0xe4, 0x52, 0x56, 0x70, 0x86, 0x08,
	0x43, 0x44, 0xe2, 0x03, 0x82, 0x3c, 0xc3, 0x1c, 0x43, 0x5c, 0x15, 0x32,
	0x8b, 0x15, 0xf2, 0xf2, 0x4b, 0x14, 0x8a, 0x53, 0x4b, 0xb8, 0xa0, 0x0a,
	0x3c, 0x7c, 0x7d, 0xe3, 0x7d, 0x3d, 0x83, 0x82, 0xfc, 0x83, 0x80, 0xda,
	0x00, 0x48, 0x14, 0x67, 0x7f, 0x4c, 0x00, 0x00, 0x00,
};
static const unsigned char kconfig_gz_dynamic[408] = {
	0x1f, 0x8b, 0x08, 0x08, 0x00, 0x00, 0x00, 0x00, 0x02, 0xff, 0x63, 0x6f,
	0x6e, 0x66, 0x69, 0x67, 0x00, 0x6d, 0x95, 0x31, 0x4b, 0x03, 0x41, 0x10,
	0x46, 0x7b, 0x7f, 0xc5, 0x81, 0x7f, 0xe0, 0x66, 0x77, 0x66, 0x67, 0xb6,
	0x48, 0x11, 0xe2, 0xa9, 0x07, 0x26, 0x17, 0xce, 0x90, 0x22, 0xcd, 0x55,
	0x16, 0x16, 0x6a, 0x91, 0x34, 0xfe, 0x7b, 0x05, 0x15, 0x82, 0xfb, 0xda,
	0x65, 0xbe, 0xe2, 0xf1, 0x1e, 0xec, 0x66, 0xda, 0xdd, 0x8f, 0x0f, 0xcb,
	0xb4, 0x3f, 0x8c, 0xd3, 0x6e, 0xe9, 0xfb, 0x7e, 0xf5, 0x76, 0xb3, 0xf9,
	0xf7, 0x26, 0xab, 0xcf, 0xe6, 0x2d, 0xc1, 0x5b, 0x86, 0xad, 0xc2, 0x9d,
	0xc1, 0x5b, 0x81, 0xad, 0xc3, 0x5d, 0xc0, 0x5b, 0x6d, 0xb7, 0xd2, 0xb7,
	0x77, 0x02, 0x1c, 0x92, 0x60, 0x9b, 0xe1, 0x0e, 0x38, 0xc4, 0x60, 0x5b,
	0xe0, 0x0e, 0x38, 0x24, 0x60, 0x5b, 0xdb, 0xbb, 0x04, 0x1c, 0x49, 0xda,
	0x6d, 0x02, 0x1f, 0x09, 0x38, 0x92, 0xc2, 0x16, 0x7c, 0x24, 0xe0, 0x48,
	0x0e, 0x5b, 0xf0, 0x91, 0x80, 0x23, 0x43, 0x57, 0x19, 0x7c, 0x64, 0xe0,
	0xc8, 0xd0, 0x55, 0x06, 0x1f, 0x19, 0x38, 0x32, 0x74, 0x95, 0xc1, 0x47,
	0x06, 0x8e, 0x0c, 0x5d, 0x29, 0xf8, 0x50, 0xe0, 0x50, 0xe8, 0x4a, 0xc1,
	0x87, 0x02, 0x87, 0x42, 0x57, 0x0a, 0x3e, 0x14, 0x38, 0x14, 0xba, 0x52,
	0xf0, 0x61, 0xc0, 0x61, 0xd0, 0x95, 0x81, 0x0f, 0x03, 0x0e, 0x83, 0xae,
	0x0c, 0x7c, 0x18, 0x70, 0x18, 0x74, 0x65, 0xe0, 0xc3, 0x80, 0xa3, 0x40,
	0x57, 0x05, 0x7c, 0x14, 0xe0, 0x28, 0xd0, 0x55, 0x01, 0x1f, 0x05, 0x38,
	0x0a, 0x74, 0x55, 0xc0, 0x47, 0x01, 0x8e, 0x02, 0x5d, 0x39, 0xf8, 0x70,
	0xe0, 0x70, 0xe8, 0xca, 0xc1, 0x87, 0x03, 0x87, 0x43, 0x57, 0x0e, 0x3e,
	0x1c, 0x38, 0x1c, 0xba, 0x72, 0xf0, 0x11, 0xc0, 0x11, 0xd0, 0x55, 0x80,
	0x8f, 0x00, 0x8e, 0x80, 0xae, 0x02, 0x7c, 0x04, 0x70, 0x04, 0x74, 0x15,
	0xe0, 0x23, 0x80, 0xa3, 0x42, 0x57, 0x15, 0x7c, 0x54, 0xe0, 0xa8, 0xd0,
	0x55, 0x05, 0x1f, 0x15, 0x38, 0x2a, 0x74, 0x55, 0xc1, 0x47, 0x05, 0x8e,
	0xda, 0x76, 0x25, 0x7d, 0xeb, 0x43, 0xe0, 0x3f, 0x97, 0x3e, 0xc1, 0x36,
	0xc3, 0x9d, 0xc2, 0x9b, 0xc1, 0xb6, 0xc0, 0x9d, 0xc3, 0x5b, 0xc0, 0xb6,
	0xf5, 0x21, 0xf0, 0x9f, 0x8b, 0xb4, 0x5d, 0x89, 0x24, 0xb8, 0x03, 0x0e,
	0x51, 0xd8, 0x1a, 0xdc, 0x01, 0x87, 0x38, 0x6c, 0x03, 0xee, 0xae, 0x38,
	0x4e, 0xd3, 0x6e, 0x58, 0xee, 0x86, 0xe3, 0xb8, 0x19, 0xbe, 0x1f, 0x6f,
	0xbb, 0xdf, 0xe7, 0x9f, 0x97, 0x65, 0x3f, 0x8f, 0xc7, 0xf5, 0x61, 0xe8,
	0x5e, 0xcf, 0xdd, 0xfb, 0xc7, 0xa5, 0x3b, 0xbf, 0x5c, 0xfe, 0x76, 0x8f,
	0xdb, 0xed, 0xb2, 0x1d, 0xe7, 0x79, 0x9a, 0xaf, 0x67, 0x4f, 0xeb, 0xe7,
	0xc3, 0xf5, 0xf1, 0x17, 0x1b, 0xc2, 0xb9, 0x1e, 0xc5, 0x09, 0x00, 0x00,
};
static const unsigned char kconfig_gz_stored[99] = {
	0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0x01, 0x4c,
	0x00, 0xb3, 0xff, 0x43, 0x4f, 0x4e, 0x46, 0x49, 0x47, 0x5f, 0x5a, 0x4f,
	0x4e, 0x45, 0x5f, 0x44, 0x45, 0x56, 0x49, 0x43, 0x45, 0x3d, 0x79, 0x0a,
	0x23, 0x20, 0x43, 0x4f, 0x4e, 0x46, 0x49, 0x47, 0x5f, 0x44, 0x45, 0x56,
	0x49, 0x43, 0x45, 0x5f, 0x50, 0x52, 0x49, 0x56, 0x41, 0x54, 0x45, 0x20,
	0x69, 0x73, 0x20, 0x6e, 0x6f, 0x74, 0x20, 0x73, 0x65, 0x74, 0x0a, 0x43,
	0x4f, 0x4e, 0x46, 0x49, 0x47, 0x5f, 0x48, 0x4d, 0x4d, 0x5f, 0x4d, 0x49,
	0x52, 0x52, 0x4f, 0x52, 0x3d, 0x79, 0x0a, 0x48, 0x14, 0x67, 0x7f, 0x4c,
	0x00, 0x00, 0x00,
};

static char tmpdir[] = "/tmp/vmmx-info-test-XXXXXX";

static void write_file(const char *path, const void *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0 || write(fd, data, len) != (ssize_t)len || close(fd) || chmod(path, mode))
		bail("cannot write %s", path);
}

static const char *tmp_path(const char *name)
{
	static char paths[16][512];
	static int next;
	char *p = paths[next++ % 16];

	snprintf(p, 512, "%s/%s", tmpdir, name);
	return p;
}

static const char *put_text(const char *name, const char *text)
{
	const char *p = tmp_path(name);

	write_file(p, text, strlen(text), 0644);
	return p;
}

/* A context on the sim whatever the suite runs on: the HMM reasons are the machine's. */
static struct vmmx_ctx *sim_ctx(const char *const *vars)
{
	struct vmmx_config cfg;
	struct vmmx_ctx *ctx;
	int err;

	vmmx_config_init(&cfg);
	cfg.flags = VMMX_CONFIG_NO_ENV;
	cfg.backend = "sim";
	cfg.log = "info";
	cfg.log_fn = test_log_sink;
	cfg.vars = vars;
	err = vmmx_ctx_create(&cfg, &ctx);
	if (err)
		bail("vmmx_ctx_create(sim): %s", vmmx_last_error());
	return ctx;
}

static int probe(struct vmmx_ctx *ctx, struct vmmx_hmm_info *h, const char *version,
		 const char *uvm, const char *kconfig)
{
	memset(h, 0x5a, sizeof(*h));
	h->size = sizeof(*h);
	return vmmx__hmm_probe_paths(ctx, h, version, uvm, kconfig);
}

/* ---- vmmx_device_info ---- */

#define SIM_ONLY_DEVICE_TESTS 18

static void test_device_info(void)
{
	static const char *const one[] = { "VMMX_SIM_DEVICES=1", NULL };
	static const char *const two[] = { "VMMX_SIM_DEVICES=2", "VMMX_DEVICE_LIMIT=64MiB,1:32MiB",
					   NULL };
	struct vmmx_device_info di, d1, small;
	/* One device on sim even when the suite runs with VMMX_SIM_DEVICES=2. */
	struct vmmx_ctx *ctx = test_ctx(one);
	int err;

	memset(&di, 0, sizeof(di));
	di.size = sizeof(di);
	err = vmmx_device_info(ctx, 0, &di);
	is_err(0, err, "vmmx_device_info(device 0)");
	is_int(0, di.ordinal, "vmmx_device_info: ordinal");
	ok(di.name[0] != '\0', "vmmx_device_info: the context's device has a name (%s)", di.name);
	ok(di.total > 0 && di.free <= di.total, "vmmx_device_info: free <= total, total > 0");
	is_int(1, di.vmm, "vmmx_device_info: vmm");
	ok(di.granularity_device > 0 && di.granularity_host > 0,
	   "vmmx_device_info: both granularities known");
	is_uint(sizeof(di), di.size, "vmmx_device_info: size is left as the caller set it");
	if (test_on_sim()) {
		is_uint(1ull << 30, di.total, "vmmx_device_info(sim): 1 GiB of device memory");
		is_int(9, di.compute_major, "vmmx_device_info(sim): compute capability 9.x");
		is_int(0, di.compute_minor, "vmmx_device_info(sim): compute capability x.0");
		ok(di.sm_count > 0, "vmmx_device_info(sim): SMs");
		is_int(1, di.host_vmm, "vmmx_device_info(sim): host_vmm");
		is_int(1, di.host_numa_vmm, "vmmx_device_info(sim): host_numa_vmm");
		is_int(0, di.host_numa_id, "vmmx_device_info(sim): host_numa_id");
		is_int(1, di.host_register, "vmmx_device_info(sim): host_register");
		is_int(1, di.host_pointer_for_registered,
		       "vmmx_device_info(sim): host_pointer_for_registered");
		is_int(0, di.pageable_access, "vmmx_device_info(sim): no pageable access");
		is_int(0, di.pageable_host_page_tables,
		       "vmmx_device_info(sim): no host page tables");
		is_int(1, di.posix_fd, "vmmx_device_info(sim): posix_fd");
		is_int(1, di.concurrent_managed, "vmmx_device_info(sim): concurrent_managed");
		is_int(1, di.unified_addressing, "vmmx_device_info(sim): unified_addressing");
		is_int(0, di.gpu_direct_rdma_vmm, "vmmx_device_info(sim): no GPUDirect RDMA");
		is_uint(2 * MiB, di.granularity_device, "vmmx_device_info(sim): device granularity 2 MiB");
		is_uint(2 * MiB, di.granularity_host, "vmmx_device_info(sim): host granularity 2 MiB");
		is_int(0, di.peer_count, "vmmx_device_info(sim): one device, no peers");
	} else {
		for (int i = 0; i < SIM_ONLY_DEVICE_TESTS; i++)
			skip("sim's attributes (running on %s)", test_backend());
	}

	/* Bad devices: ENODEV, nothing written. */
	memset(&d1, 0x5a, sizeof(d1));
	d1.size = sizeof(d1);
	is_err(-VMMX_ENODEV, vmmx_device_info(ctx, -1, &d1), "vmmx_device_info(-1) is ENODEV");
	is_err(-VMMX_ENODEV, vmmx_device_info(ctx, 4096, &d1), "vmmx_device_info(4096) is ENODEV");
	like(vmmx_last_error(), "no device 4096", "vmmx_device_info: the error names the device");
	ok(d1.ordinal == 0x5a5a5a5a, "vmmx_device_info: nothing written on failure");
	is_err(-VMMX_EINVAL, vmmx_device_info(NULL, 0, &di), "vmmx_device_info(NULL ctx)");
	is_err(-VMMX_EINVAL, vmmx_device_info(ctx, 0, NULL), "vmmx_device_info(NULL info)");
	small.size = 0;
	is_err(-VMMX_EINVAL, vmmx_device_info(ctx, 0, &small), "vmmx_device_info: size 0 is EINVAL");

	/* An older, shorter struct: only its bytes are written. */
	memset(&small, 0x5a, sizeof(small));
	small.size = offsetof(struct vmmx_device_info, total);
	is_err(0, vmmx_device_info(ctx, 0, &small), "vmmx_device_info with a struct up to name");
	ok(small.ordinal == 0 && !strcmp(small.name, di.name) &&
		   small.size == offsetof(struct vmmx_device_info, total),
	   "vmmx_device_info: the members the size covers are filled");
	ok(small.total == 0x5a5a5a5a5a5a5a5aull && small.vmm == 0x5a5a5a5a,
	   "vmmx_device_info: nothing past the size is written");
	vmmx_ctx_destroy(ctx);

	/* Two emulated devices are each other's peers. */
	if (test_on_sim()) {
		ctx = test_ctx(two);
		di.size = sizeof(di);
		d1.size = sizeof(d1);
		is_err(0, vmmx_device_info(ctx, 0, &di), "vmmx_device_info(sim 2 devices, device 0)");
		is_err(0, vmmx_device_info(ctx, 1, &d1), "vmmx_device_info(sim 2 devices, device 1)");
		ok(di.peer_count == 1 && di.peers[0] == 1, "vmmx_device_info: device 0 reaches device 1");
		ok(d1.peer_count == 1 && d1.peers[0] == 0, "vmmx_device_info: device 1 reaches device 0");
		ok(d1.ordinal == 1 && d1.total == 1ull << 30 && d1.vmm == 1,
		   "vmmx_device_info: another device's memory and attributes");
		is_string("libvmmx simulated device 1", d1.name,
			  "vmmx_device_info: another device is named too (vmmx-info lists it)");
		ok(di.usable == 1 && d1.usable == 1 && di.limit == 64 * MiB && d1.limit == 32 * MiB,
		   "vmmx_device_info: both usable, with their own limits (64 and %llu MiB)",
		   (unsigned long long)(d1.limit / MiB));
		is_err(-VMMX_ENODEV, vmmx_device_info(ctx, 2, &d1),
		       "vmmx_device_info(device 2 of 2) is ENODEV");
		vmmx_ctx_destroy(ctx);
	} else {
		for (int i = 0; i < 8; i++)
			skip("VMMX_SIM_DEVICES needs the sim (running on %s)", test_backend());
	}
}

/* ---- vmmx_hmm_probe ---- */

static const char open_version[] =
	"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
	"(dvs-builder@U22-I3-AE18-23-3)  Thu Oct  9 20:00:00 UTC 2025\n"
	"GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n";
static const char proprietary_version[] =
	"NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
	"GCC version:  gcc version 12.3.0\n";
static const char kconfig_no_dp[] = "CONFIG_ZONE_DEVICE=y\n# CONFIG_DEVICE_PRIVATE is not set\n"
				    "CONFIG_HMM_MIRROR=y\nCONFIG_DEVICE_PRIVATE_X=y\n";
static const char kconfig_ok[] = "CONFIG_ZONE_DEVICE=y\nCONFIG_DEVICE_PRIVATE=y\nCONFIG_HMM_MIRROR=y\n";

static void test_hmm(void)
{
	static const char *const pageable[] = { "VMMX_SIM_PAGEABLE=1", NULL };
	const char *vopen = put_text("version-open", open_version);
	const char *vprop = put_text("version-proprietary", proprietary_version);
	const char *uvm_n = put_text("uvm-N", "N\n");
	const char *uvm_y = put_text("uvm-Y", "Y\n");
	const char *kc_no_dp = put_text("config-no-dp", kconfig_no_dp);
	const char *kc_ok = put_text("config-ok", kconfig_ok);
	const char *gz[3] = { tmp_path("config-fixed.gz"), tmp_path("config-dynamic.gz"),
			      tmp_path("config-stored.gz") };
	const char *bad_gz = tmp_path("config-bad.gz");
	unsigned char corrupt[sizeof(kconfig_gz_fixed)];
	struct vmmx_ctx *ctx = sim_ctx(NULL), *pctx;
	struct vmmx_hmm_info h, small;
	struct utsname uts;
	char boot[512];
	bool have_config;

	write_file(gz[0], kconfig_gz_fixed, sizeof(kconfig_gz_fixed), 0644);
	write_file(gz[1], kconfig_gz_dynamic, sizeof(kconfig_gz_dynamic), 0644);
	write_file(gz[2], kconfig_gz_stored, sizeof(kconfig_gz_stored), 0644);
	memcpy(corrupt, kconfig_gz_fixed, sizeof(corrupt));
	corrupt[sizeof(corrupt) - 6] ^= 0x40; /* the CRC */
	write_file(bad_gz, corrupt, sizeof(corrupt), 0644);

	/* The project's machines: open module, HMM not disabled, no DEVICE_PRIVATE. */
	is_err(0, probe(ctx, &h, vopen, uvm_n, kc_no_dp), "vmmx_hmm_probe: open, N, no DEVICE_PRIVATE");
	is_int(VMMX_HMM_ABSENT, h.state, "vmmx_hmm_probe: state absent");
	is_int(0, h.device_pageable_access, "vmmx_hmm_probe: the sim device has no pageable access");
	is_int(1, h.open_module, "vmmx_hmm_probe: \"Open Kernel Module\" is the open module");
	is_int(0, h.uvm_disable_hmm, "vmmx_hmm_probe: uvm_disable_hmm=N");
	is_int(0, h.config_device_private, "vmmx_hmm_probe: \"is not set\" is 0");
	is_int(1, h.config_hmm_mirror, "vmmx_hmm_probe: CONFIG_HMM_MIRROR=y is 1");
	like(h.why, "without CONFIG_DEVICE_PRIVATE (from ", "vmmx_hmm_probe: why names CONFIG_DEVICE_PRIVATE");
	like(h.why, kc_no_dp, "vmmx_hmm_probe: why names the configuration file");
	ok(!strstr(h.why, "proprietary") && !strstr(h.why, "uvm_disable_hmm") &&
		   !strstr(h.why, "HMM_MIRROR") && !strstr(h.why, "unknown"),
	   "vmmx_hmm_probe: why names nothing that is fine (%s)", h.why);
	ok(!strncmp(h.why, "HMM is absent: ", 15) && h.why[strlen(h.why) - 1] == '.',
	   "vmmx_hmm_probe: why is one sentence");
	ok(!uname(&uts) && !strcmp(h.kernel, uts.release), "vmmx_hmm_probe: kernel is uname's release");
	is_uint(sizeof(h), h.size, "vmmx_hmm_probe: size is left as the caller set it");

	is_err(0, probe(ctx, &h, vprop, uvm_n, kc_ok), "vmmx_hmm_probe: proprietary module");
	is_int(0, h.open_module, "vmmx_hmm_probe: open_module 0 for the proprietary module");
	like(h.why, "proprietary", "vmmx_hmm_probe: why names the proprietary module");
	ok(!strstr(h.why, "CONFIG_"), "vmmx_hmm_probe: a good config is not blamed");

	is_err(0, probe(ctx, &h, vopen, uvm_y, kc_ok), "vmmx_hmm_probe: uvm_disable_hmm=Y");
	is_int(1, h.uvm_disable_hmm, "vmmx_hmm_probe: uvm_disable_hmm 1");
	like(h.why, "uvm_disable_hmm=Y", "vmmx_hmm_probe: why names uvm_disable_hmm=Y");
	like(h.why, uvm_y, "vmmx_hmm_probe: why names the parameter file");

	/* Missing files: unknown, and the why says which. */
	is_err(0, probe(ctx, &h, tmp_path("none-1"), tmp_path("none-2"), tmp_path("none-3")),
	       "vmmx_hmm_probe: missing files");
	ok(h.open_module == -1 && h.uvm_disable_hmm == -1 && h.config_device_private == -1 &&
		   h.config_hmm_mirror == -1,
	   "vmmx_hmm_probe: missing files are unknown (-1)");
	like(h.why, "flavour is unknown (cannot read ", "vmmx_hmm_probe: why: module unknown");
	like(h.why, "uvm_disable_hmm is unknown", "vmmx_hmm_probe: why: uvm_disable_hmm unknown");
	like(h.why, "configuration is unknown (cannot read ", "vmmx_hmm_probe: why: config unknown");
	is_err(0, probe(ctx, &h, NULL, NULL, NULL), "vmmx_hmm_probe: no files at all");
	like(h.why, "no /boot/config-RELEASE or /proc/config.gz",
	     "vmmx_hmm_probe: why says where a configuration was looked for");

	/* Compressed configurations, every kind of deflate block. */
	for (int i = 0; i < 3; i++) {
		static const char *const kind[] = { "fixed", "dynamic", "stored" };

		is_err(0, probe(ctx, &h, vopen, uvm_n, gz[i]), "vmmx_hmm_probe: gzip (%s blocks)",
		       kind[i]);
		ok(h.config_device_private == 0 && h.config_hmm_mirror == 1,
		   "vmmx_hmm_probe: gzip (%s blocks) read right", kind[i]);
	}
	is_err(0, probe(ctx, &h, vopen, uvm_n, bad_gz), "vmmx_hmm_probe: corrupt gzip");
	ok(h.config_device_private == -1 && strstr(h.why, "is not valid gzip data"),
	   "vmmx_hmm_probe: a corrupt gzip is unknown, and why says so");

	/* Arguments and the size prefix. */
	memset(&small, 0x5a, sizeof(small));
	small.size = offsetof(struct vmmx_hmm_info, open_module);
	is_err(0, vmmx__hmm_probe_paths(ctx, &small, vopen, uvm_n, kc_ok),
	       "vmmx_hmm_probe with a struct up to device_pageable_access");
	ok(small.state == VMMX_HMM_ABSENT && small.device_pageable_access == 0 &&
		   small.open_module == 0x5a5a5a5a && small.why[0] == 0x5a,
	   "vmmx_hmm_probe: nothing past the size is written");
	small.size = sizeof(size_t);
	is_err(-VMMX_EINVAL, vmmx_hmm_probe(ctx, &small), "vmmx_hmm_probe: a size without state is EINVAL");
	is_err(-VMMX_EINVAL, vmmx_hmm_probe(NULL, &h), "vmmx_hmm_probe(NULL ctx)");
	is_err(-VMMX_EINVAL, vmmx_hmm_probe(ctx, NULL), "vmmx_hmm_probe(NULL info)");

	/* The real files of this machine. */
	h.size = sizeof(h);
	is_err(0, vmmx_hmm_probe(ctx, &h), "vmmx_hmm_probe (this machine's files)");
	diag("this machine: %s", h.why);
	snprintf(boot, sizeof(boot), "/boot/config-%s", uts.release);
	have_config = !access(boot, R_OK) || !access("/proc/config.gz", R_OK);
	ok(have_config ? h.config_device_private >= 0 : h.config_device_private == -1,
	   "vmmx_hmm_probe: reads this machine's kernel configuration (%s)",
	   have_config ? "present" : "absent");
	is_int(VMMX_HMM_ABSENT, h.state, "vmmx_hmm_probe: the sim has no HMM by default");
	vmmx_ctx_destroy(ctx);

	/* VMMX_SIM_PAGEABLE: pageable access through host page tables, i.e. ATS. */
	{
		struct vmmx_config cfg;
		int err;

		vmmx_config_init(&cfg);
		cfg.flags = VMMX_CONFIG_NO_ENV;
		cfg.backend = "sim";
		cfg.log_fn = test_log_sink;
		cfg.vars = pageable;
		err = vmmx_ctx_create(&cfg, &pctx);
		if (!err) {
			h.size = sizeof(h);
			is_err(0, vmmx_hmm_probe(pctx, &h), "vmmx_hmm_probe(VMMX_SIM_PAGEABLE=1)");
			is_int(VMMX_HMM_ATS, h.state, "vmmx_hmm_probe: pageable + host page tables is ATS");
			like(h.why, "ATS", "vmmx_hmm_probe: why says how pageable memory is reached");
			vmmx_ctx_destroy(pctx);
		} else {
			for (int i = 0; i < 3; i++)
				skip("VMMX_SIM_PAGEABLE not known: %s", vmmx_last_error());
		}
	}
}

/* ---- vmmx_policy_list ---- */

static const struct vmmx_policy_info *find(const struct vmmx_policy_info *v, size_t n,
					   const char *name, const char *file_part, size_t *at)
{
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(v[i].name, name) && strstr(v[i].file, file_part)) {
			if (at)
				*at = i;
			return &v[i];
		}
	}
	return NULL;
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
	FILE *f = fopen(from, "rb");
	static char data[16 << 20];
	size_t n;

	if (!f)
		bail("cannot open %s", from);
	n = fread(data, 1, sizeof(data), f);
	fclose(f);
	write_file(to, data, n, mode);
}

static void test_policies(void)
{
	struct vmmx_policy_info v[64], few[3];
	const struct vmmx_policy_info *p, *q;
	size_t n = 0, n2, at_file = 0, at_builtin = 0;
	struct vmmx_ctx *ctx = test_ctx(NULL);
	char dir[512], path_var[600], vars_buf[640], want[640];
	const char *vars[2] = { vars_buf, NULL };

	is_err(0, vmmx_policy_list(ctx, NULL, 0, &n), "vmmx_policy_list counts with max 0");
	ok(n >= 8 && n <= 64, "vmmx_policy_list: the build tree's plugins and the built-ins (%zu)", n);
	n2 = 0;
	is_err(0, vmmx_policy_list(ctx, v, 64, &n2), "vmmx_policy_list fills");
	is_uint(n, n2, "vmmx_policy_list: the same count both times");

	p = find(v, n2, "interleave", "/policies/.libs/vmmx_policy_interleave.so", NULL);
	ok(p && p->usable && !p->why[0], "vmmx_policy_list: the build tree's interleave is usable");
	ok(p && p->file[0] == '/' && p->description[0] &&
		   VMMX_POLICY_ABI_MAJOR_OF(p->abi) == VMMX_POLICY_ABI_MAJOR,
	   "vmmx_policy_list: interleave's file, description and ABI");
	p = find(v, n2, "tiered", "/policies/.libs/vmmx_policy_tiered.so", NULL);
	ok(p && p->usable, "vmmx_policy_list: the build tree's tiered is usable");
	ok(find(v, n2, "device", "built-in", NULL) && find(v, n2, "host", "built-in", NULL),
	   "vmmx_policy_list: the built-ins device and host");
	p = find(v, n2, "device-first", "/vmmx_policy_device-first.so", &at_file);
	q = find(v, n2, "device-first", "built-in", &at_builtin);
	ok(p && q && q->usable && !strcmp(q->file, "built-in") && q->description[0],
	   "vmmx_policy_list: device-first is built in");
	ok(p && q && at_file < at_builtin, "vmmx_policy_list: files come before the built-ins");
	snprintf(want, sizeof(want), "hidden by %s", p ? p->file : "?");
	is_string(want, q ? q->why : "", "vmmx_policy_list: the built-in is hidden by the file");

	/* A smaller array: the count is the whole, nothing past max is written. */
	memset(few, 0x5a, sizeof(few));
	is_err(0, vmmx_policy_list(ctx, few, 2, &n2), "vmmx_policy_list with max 2");
	ok(n2 == n && !strcmp(few[0].name, v[0].name) && !strcmp(few[1].name, v[1].name) &&
		   few[2].usable == 0x5a5a5a5a,
	   "vmmx_policy_list: the first two only, and the full count");
	is_err(-VMMX_EINVAL, vmmx_policy_list(ctx, NULL, 1, &n2), "vmmx_policy_list(NULL out, max 1)");
	is_err(-VMMX_EINVAL, vmmx_policy_list(ctx, v, 1, NULL), "vmmx_policy_list(NULL count_p)");
	is_err(-VMMX_EINVAL, vmmx_policy_list(NULL, v, 1, &n2), "vmmx_policy_list(NULL ctx)");

	/* Refused copies in a directory of our own, searched first. */
	p = find(v, n, "interleave", "/policies/.libs/", NULL);
	if (!p)
		bail("no build-tree interleave plugin to copy");
	snprintf(dir, sizeof(dir), "%s/policies", tmpdir);
	if (mkdir(dir, 0700))
		bail("mkdir %s", dir);
	snprintf(want, sizeof(want), "%s/vmmx_policy_interleave.so", dir);
	copy_file(p->file, want, 0664); /* group-writable: refused */
	snprintf(want, sizeof(want), "%s/vmmx_policy_wrongname.so", dir);
	copy_file(p->file, want, 0644); /* calls itself interleave: refused */
	snprintf(path_var, sizeof(path_var), "relative/dir:%s", dir);
	snprintf(vars_buf, sizeof(vars_buf), "VMMX_POLICY_PATH=%s", path_var);
	vmmx_ctx_destroy(ctx);
	ctx = test_ctx(vars);
	test_log_clear();
	is_err(0, vmmx_policy_list(ctx, v, 64, &n2), "vmmx_policy_list with VMMX_POLICY_PATH");
	is_uint(n + 2, n2, "vmmx_policy_list: two more files (the relative element is skipped)");
	is_string("interleave", v[0].name, "vmmx_policy_list: VMMX_POLICY_PATH comes first");
	snprintf(want, sizeof(want), "%s/vmmx_policy_interleave.so", dir);
	is_string(want, v[0].file, "vmmx_policy_list: the refused file's path");
	is_int(0, v[0].usable, "vmmx_policy_list: a group-writable file is not usable");
	is_string("file writable by group or others", v[0].why,
		  "vmmx_policy_list: why, as the loader says it");
	ok(v[1].usable == 0 && !strcmp(v[1].name, "wrongname") &&
		   strstr(v[1].why, "calls itself \"interleave\""),
	   "vmmx_policy_list: a file whose table names another policy is refused (%s)", v[1].why);
	ok(VMMX_POLICY_ABI_MAJOR_OF(v[1].abi) == VMMX_POLICY_ABI_MAJOR,
	   "vmmx_policy_list: a refused file's ABI when its table was read");
	p = find(v, n2, "interleave", "/policies/.libs/", NULL);
	ok(p && p->usable && !p->why[0],
	   "vmmx_policy_list: the next interleave is usable, hidden by nothing refused");
	like(test_log(), "policy list: refused ", "vmmx_policy_list explains refusals at info level");

	/* The loader agrees: it refuses the same file for the same reason. */
	{
		struct vmmx_buf *buf;

		test_log_clear();
		snprintf(want, sizeof(want),
			 "policy loader: refused %s/vmmx_policy_interleave.so: file writable by group or others",
			 dir);
		if (!is_err(0, vmmx_buf_create(ctx, 4 * MiB, "interleave", &buf),
			    "vmmx_buf_create(interleave) with the refused copy first"))
			buf = NULL;
		like(test_log(), want, "the loader refuses the copy the list marked refused");
		vmmx_buf_destroy(buf);
	}
	vmmx_ctx_destroy(ctx);
	snprintf(want, sizeof(want), "%s/vmmx_policy_interleave.so", dir);
	unlink(want);
	snprintf(want, sizeof(want), "%s/vmmx_policy_wrongname.so", dir);
	unlink(want);
	rmdir(dir);
}

static void cleanup(void)
{
	static const char *const names[] = {
		"version-open", "version-proprietary", "uvm-N", "uvm-Y", "config-no-dp",
		"config-ok", "config-fixed.gz", "config-dynamic.gz", "config-stored.gz",
		"config-bad.gz",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unlink(tmp_path(names[i]));
	rmdir(tmpdir);
}

int main(void)
{
	plan(118);
	if (!mkdtemp(tmpdir))
		bail("mkdtemp failed");
	test_device_info();
	test_hmm();
	test_policies();
	cleanup();
	return tap_done();
}
