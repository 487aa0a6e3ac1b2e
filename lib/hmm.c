// SPDX-License-Identifier: MIT
/*
 * hmm.c - whether kernels can touch pageable (malloc'd) host memory, and
 * if not, why (vmmx_hmm_probe).
 *
 * The device's attributes say whether it can (PAGEABLE_MEMORY_ACCESS, and
 * ..._USES_HOST_PAGE_TABLES for ATS).  When it cannot, the machine says why,
 * and every reason found is reported, because several often hold at once:
 *  - NVIDIA's HMM runs only with the open kernel module
 *    (/proc/driver/nvidia/version says "Open Kernel Module");
 *  - nvidia_uvm can be loaded with uvm_disable_hmm=Y;
 *  - the kernel must be built with CONFIG_DEVICE_PRIVATE (and HMM_MIRROR):
 *    the project's H100/H200 machines lack DEVICE_PRIVATE (docs/DRIVER.md);
 *  - Linux 6.1.24, 6.2.11 or 6.3 and later, and a CUDA 12.2 driver.
 * The kernel configuration is /boot/config-RELEASE or, where there is none
 * (as on the project's machines), /proc/config.gz: zlib reads either (a
 * file that is not gzip is read as it is).
 *
 * No locks: the files are read on the caller's thread, the attributes are
 * driver queries.  The paths are arguments of vmmx__hmm_probe_paths so that
 * tests can hand it files of their own.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <zlib.h>

#include "internal/addr.h"

/* Kernel configurations are 100-300 KiB; anything far beyond is not one. */
#define FILE_MAX (16u << 20)

/*
 * Read a whole file into a NUL-terminated malloc'd buffer; 0, or -1 with
 * errno set (EFBIG past @max).
 */
static int read_all(const char *path, size_t max, char **buf_p, size_t *len_p)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap + 1);
	int fd, saved;
	ssize_t n;

	if (!buf)
		return -1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		goto err_free;
	/* procfs and sysfs files say size 0 or 4096: read to the end, whatever stat says. */
	for (;;) {
		if (len == cap) {
			char *nb;

			if (cap >= max) {
				errno = EFBIG;
				goto err_close;
			}
			cap *= 2;
			nb = realloc(buf, cap + 1);
			if (!nb)
				goto err_close;
			buf = nb;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto err_close;
		if (!n)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	*buf_p = buf;
	*len_p = len;
	return 0;

err_close:
	saved = errno;
	close(fd);
	errno = saved;
err_free:
	saved = errno;
	free(buf);
	errno = saved;
	return -1;
}

/* ---- what the files say ---- */

/* 1 for =y or =m, 0 for "is not set", =n or a symbol the config does not list. */
static int kconfig_has(const char *text, const char *sym)
{
	size_t n = strlen(sym);

	for (const char *line = text; line && *line;) {
		const char *nl = strchr(line, '\n');

		if (!strncmp(line, sym, n) && line[n] == '=')
			return line[n + 1] == 'y' || line[n + 1] == 'm';
		line = nl ? nl + 1 : NULL;
	}
	return 0;
}

/*
 * Read a configuration, plain or gzip (zlib reads either); malloc'd text or
 * NULL with @err set.
 */
static char *kconfig_read(const char *path, char *err, size_t errlen)
{
	size_t len = 0, cap = 64 << 10;
	char *text = NULL, *nt;
	gzFile f;
	int n;

	errno = 0;
	f = gzopen(path, "rbe"); /* e: O_CLOEXEC */
	if (!f) {
		snprintf(err, errlen, "cannot read %s: %s", path,
			 strerror(errno ? errno : ENOMEM));
		return NULL;
	}
	for (;;) {
		if (!text || len == cap) {
			if (text)
				cap *= 2;
			if (cap > FILE_MAX) {
				snprintf(err, errlen, "cannot read %s: %s", path, strerror(EFBIG));
				goto err_free;
			}
			nt = realloc(text, cap + 1);
			if (!nt) {
				snprintf(err, errlen, "cannot read %s: %s", path, strerror(ENOMEM));
				goto err_free;
			}
			text = nt;
		}
		n = gzread(f, text + len, (unsigned int)(cap - len));
		if (n < 0) {
			int zerr;
			const char *msg = gzerror(f, &zerr);

			if (zerr == Z_ERRNO)
				snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
			else
				snprintf(err, errlen, "%s is not valid gzip data (%s)", path, msg);
			goto err_free;
		}
		if (!n)
			break;
		len += (size_t)n;
	}
	gzclose(f);
	text[len] = '\0';
	return text;

err_free:
	free(text);
	gzclose(f);
	return NULL;
}

/* Whether Linux @release predates NVIDIA's HMM: 6.1.24, 6.2.11, 6.3 and later work. */
static int kernel_too_old(const char *release)
{
	int maj = 0, min = 0, patch = 0;

	if (sscanf(release, "%d.%d.%d", &maj, &min, &patch) < 2)
		return 0; /* unknown form: do not guess */
	if (maj != 6)
		return maj < 6;
	return min == 0 || (min == 1 && patch < 24) || (min == 2 && patch < 11);
}

struct why {
	char *buf;
	size_t len, used;
	int n;
};

/* Append one reason to the sentence; a sentence too long ends in "...". */
static void reason(struct why *w, const char *fmt, ...) VMMX__FMT(2, 3);

static void reason(struct why *w, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (w->used + 1 >= w->len)
		return;
	if (w->n++) {
		n = snprintf(w->buf + w->used, w->len - w->used, "; ");
		w->used += (size_t)n < w->len - w->used ? (size_t)n : w->len - w->used - 1;
	}
	va_start(ap, fmt);
	n = vsnprintf(w->buf + w->used, w->len - w->used, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= w->len - w->used) {
		w->used = w->len - 1;
		memcpy(w->buf + w->len - 4, "...", 4);
		return;
	}
	w->used += (size_t)n;
}

int vmmx__hmm_probe_paths(struct vmmx_ctx *ctx, struct vmmx_hmm_info *info,
			  const char *proc_version, const char *uvm_param, const char *kconfig)
{
	struct vmmx_hmm_info out;
	struct utsname uts;
	struct vmm_info vi;
	int tables = -1;
	char *text, kerr[384], verr[384], uerr[384];
	struct why w;
	size_t len, n;

	vmmx__clear_last_error();
	if (!ctx || !info || info->size < offsetof(struct vmmx_hmm_info, device_pageable_access))
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL,
				  "vmmx_hmm_probe: NULL argument or info->size not set");
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_hmm_probe");
	memset(&out, 0, sizeof(out));
	if (vmm_query(ctx->vmm, &vi))
		vi = (struct vmm_info){ .backend = "?" };

	/* What the device says decides; an unanswered attribute counts as "no". */
	if (vmm_attr(ctx->vmm, ctx->device, VMM_ATTR_PAGEABLE_ACCESS, &out.device_pageable_access))
		out.device_pageable_access = -1;
	if (out.device_pageable_access == 1 &&
	    vmm_attr(ctx->vmm, ctx->device, VMM_ATTR_PAGEABLE_HOST_PAGE_TABLES, &tables))
		tables = -1;
	out.state = out.device_pageable_access != 1 ? VMMX_HMM_ABSENT
		    : tables == 1			? VMMX_HMM_ATS
							: VMMX_HMM_HMM;

	out.open_module = -1;
	verr[0] = '\0';
	if (proc_version && !read_all(proc_version, FILE_MAX, &text, &len)) {
		out.open_module = strstr(text, "Open Kernel Module") ? 1
				  : strstr(text, "Kernel Module")     ? 0
								      : -1;
		if (out.open_module < 0)
			snprintf(verr, sizeof(verr), "%s names no kernel module", proc_version);
		free(text);
	} else if (proc_version) {
		snprintf(verr, sizeof(verr), "cannot read %s: %s", proc_version, strerror(errno));
	}
	out.uvm_disable_hmm = -1;
	uerr[0] = '\0';
	if (uvm_param && !read_all(uvm_param, FILE_MAX, &text, &len)) {
		out.uvm_disable_hmm = text[0] == 'Y' || text[0] == '1'	 ? 1
				      : text[0] == 'N' || text[0] == '0' ? 0
									 : -1;
		if (out.uvm_disable_hmm < 0)
			snprintf(uerr, sizeof(uerr), "%s holds neither Y nor N", uvm_param);
		free(text);
	} else if (uvm_param) {
		snprintf(uerr, sizeof(uerr), "cannot read %s: %s", uvm_param, strerror(errno));
	}
	out.config_device_private = -1;
	out.config_hmm_mirror = -1;
	kerr[0] = '\0';
	if (kconfig && (text = kconfig_read(kconfig, kerr, sizeof(kerr)))) {
		out.config_device_private = kconfig_has(text, "CONFIG_DEVICE_PRIVATE");
		out.config_hmm_mirror = kconfig_has(text, "CONFIG_HMM_MIRROR");
		free(text);
	}
	if (!uname(&uts))
		snprintf(out.kernel, sizeof(out.kernel), "%s", uts.release);

	w = (struct why){ out.why, sizeof(out.why), 0, 0 };
	if (out.state == VMMX_HMM_ATS) {
		reason(&w, "pageable host memory works through ATS: the device walks the host's page tables");
		goto done;
	}
	if (out.state == VMMX_HMM_HMM) {
		reason(&w, "HMM works: the device reaches pageable host memory through the kernel's HMM");
		goto done;
	}
	/* Absent: every cause found, then every fact we could not read. */
	if (!strcmp(vi.backend, "sim"))
		reason(&w, "the sim backend emulates a device without pageable memory access "
			   "(VMMX_SIM_PAGEABLE=1 gives it one)");
	else if (out.device_pageable_access < 0)
		reason(&w, "the device does not report PAGEABLE_MEMORY_ACCESS");
	if (out.open_module == 0)
		reason(&w, "the NVIDIA kernel module is the proprietary one (from %s), and NVIDIA's "
			   "HMM needs the open kernel module", proc_version);
	if (out.uvm_disable_hmm == 1)
		reason(&w, "nvidia_uvm is loaded with uvm_disable_hmm=Y (%s)", uvm_param);
	if (out.config_device_private == 0 || out.config_hmm_mirror == 0)
		reason(&w, "the kernel is built without %s%s%s (from %s), which NVIDIA's HMM needs",
		       out.config_device_private == 0 ? "CONFIG_DEVICE_PRIVATE" : "",
		       !out.config_device_private && !out.config_hmm_mirror ? " and " : "",
		       out.config_hmm_mirror == 0 ? "CONFIG_HMM_MIRROR" : "", kconfig);
	if (out.kernel[0] && kernel_too_old(out.kernel))
		reason(&w, "Linux %s is older than NVIDIA's HMM needs (6.1.24, 6.2.11, 6.3 or later)",
		       out.kernel);
	if (vi.driver_version > 0 && vi.driver_version < 12020)
		reason(&w, "the CUDA driver is %d.%d and HMM needs 12.2 or later",
		       vi.driver_version / 1000, vi.driver_version % 1000 / 10);
	if (out.open_module < 0)
		reason(&w, "the kernel module's flavour is unknown (%s)",
		       verr[0] ? verr : "no driver version file");
	if (out.uvm_disable_hmm < 0)
		reason(&w, "uvm_disable_hmm is unknown (%s)", uerr[0] ? uerr : "no parameter file");
	if (out.config_device_private < 0)
		reason(&w, "the kernel configuration is unknown (%s)",
		       kerr[0] ? kerr : "no /boot/config-RELEASE or /proc/config.gz");
	if (!w.n)
		reason(&w, "no cause found in the kernel module, nvidia_uvm or the kernel configuration");
done:
	/* Prefix and full stop, in place. */
	{
		static const char head[] = "HMM is absent: ";
		size_t hl = sizeof(head) - 1, bl = strlen(out.why);

		if (out.state == VMMX_HMM_ABSENT) {
			if (bl + hl >= sizeof(out.why))
				bl = sizeof(out.why) - 1 - hl;
			memmove(out.why + hl, out.why, bl);
			memcpy(out.why, head, hl);
			bl += hl;
			out.why[bl] = '\0';
		}
		if (bl && bl + 1 < sizeof(out.why) && out.why[bl - 1] != '.') {
			out.why[bl] = '.';
			out.why[bl + 1] = '\0';
		}
	}
	/* Attributes the driver did not answer set the last error on the way. */
	vmmx__clear_last_error();
	n = info->size < sizeof(out) ? info->size : sizeof(out);
	out.size = info->size;
	memcpy(info, &out, n);
	return 0;
}

VMMX_API int vmmx_hmm_probe(struct vmmx_ctx *ctx, struct vmmx_hmm_info *info)
{
	const char *kconfig = NULL;
	char boot[sizeof(((struct utsname *)0)->release) + 16];
	struct utsname uts;

	/* The packaged configuration first; /proc/config.gz where there is none. */
	if (!uname(&uts)) {
		snprintf(boot, sizeof(boot), "/boot/config-%s", uts.release);
		if (!access(boot, R_OK))
			kconfig = boot;
	}
	if (!kconfig && !access("/proc/config.gz", R_OK))
		kconfig = "/proc/config.gz";
	return vmmx__hmm_probe_paths(ctx, info, "/proc/driver/nvidia/version",
				     "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm", kconfig);
}
