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
 * (as on the project's machines), /proc/config.gz: a small inflate below
 * reads it, so that libvmmx needs no zlib and runs no gzip.
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

/* ---- a small inflate (RFC 1951) and gzip (RFC 1952) reader ---- */

struct inflate {
	const unsigned char *in;
	size_t inlen, pos;
	unsigned int bitbuf, bitcnt;
	unsigned char *out;
	size_t outlen, outcap;
	int err;                        /* sticky: input ended, bad data, no memory */
};

struct huffman {
	short count[16];                /* codes of each length */
	short symbol[288];              /* symbols ordered by code */
};

static unsigned int bits(struct inflate *s, unsigned int need)
{
	unsigned long val = s->bitbuf;

	while (s->bitcnt < need) {
		if (s->pos == s->inlen) {
			s->err = 1;
			return 0;
		}
		val |= (unsigned long)s->in[s->pos++] << s->bitcnt;
		s->bitcnt += 8;
	}
	s->bitbuf = (unsigned int)(val >> need);
	s->bitcnt -= need;
	return (unsigned int)(val & ((1ul << need) - 1));
}

static int put(struct inflate *s, unsigned char c)
{
	if (s->outlen == s->outcap) {
		size_t cap = s->outcap ? 2 * s->outcap : 1u << 18;
		unsigned char *nb;

		if (cap > FILE_MAX) {
			s->err = 1;
			return -1;
		}
		nb = realloc(s->out, cap + 1);
		if (!nb) {
			s->err = 1;
			return -1;
		}
		s->out = nb;
		s->outcap = cap;
	}
	s->out[s->outlen++] = c;
	return 0;
}

/* Canonical Huffman code from code lengths; nonzero for an over-subscribed set. */
static int construct(struct huffman *h, const short *length, int n)
{
	short offs[16];
	int left = 1;

	memset(h->count, 0, sizeof(h->count));
	for (int i = 0; i < n; i++)
		h->count[length[i]]++;
	if (h->count[0] == n) /* no codes: decoding will fail if one is used */
		return 0;
	for (int len = 1; len < 16; len++) {
		left = (left << 1) - h->count[len];
		if (left < 0)
			return -1;
	}
	offs[1] = 0;
	for (int len = 1; len < 15; len++)
		offs[len + 1] = (short)(offs[len] + h->count[len]);
	for (int i = 0; i < n; i++)
		if (length[i])
			h->symbol[offs[length[i]]++] = (short)i;
	/* An incomplete code is allowed (one distance code, for example). */
	return 0;
}

static int decode(struct inflate *s, const struct huffman *h)
{
	int code = 0, first = 0, index = 0;

	for (int len = 1; len < 16; len++) {
		int count = h->count[len];

		code |= (int)bits(s, 1);
		if (s->err)
			return -1;
		if (code - count < first)
			return h->symbol[index + (code - first)];
		index += count;
		first = (first + count) << 1;
		code <<= 1;
	}
	s->err = 1;
	return -1;
}

static int codes(struct inflate *s, const struct huffman *lencode, const struct huffman *distcode)
{
	static const short lbase[29] = { 3,  4,  5,  6,  7,  8,  9,  10, 11,  13,
					 15, 17, 19, 23, 27, 31, 35, 43, 51,  59,
					 67, 83, 99, 115, 131, 163, 195, 227, 258 };
	static const short lext[29] = { 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
					2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0 };
	static const short dbase[30] = { 1,    2,    3,    4,    5,    7,     9,     13,
					 17,   25,   33,   49,   65,   97,    129,   193,
					 257,  385,  513,  769,  1025, 1537,  2049,  3073,
					 4097, 6145, 8193, 12289, 16385, 24577 };
	static const short dext[30] = { 0, 0, 0, 0, 1, 1, 2,  2,  3,  3,  4,  4,  5,  5,  6,
					6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13 };

	for (;;) {
		int sym = decode(s, lencode);
		size_t len, dist;

		if (sym < 0)
			return -1;
		if (sym < 256) {
			if (put(s, (unsigned char)sym))
				return -1;
			continue;
		}
		if (sym == 256)
			return 0;
		sym -= 257;
		if (sym >= 29)
			return -1;
		len = (size_t)lbase[sym] + bits(s, (unsigned int)lext[sym]);
		sym = decode(s, distcode);
		if (sym < 0 || sym >= 30)
			return -1;
		dist = (size_t)dbase[sym] + bits(s, (unsigned int)dext[sym]);
		if (s->err || dist > s->outlen)
			return -1;
		while (len--)
			if (put(s, s->out[s->outlen - dist]))
				return -1;
	}
}

static int stored(struct inflate *s)
{
	unsigned int len;

	s->bitbuf = 0; /* to a byte boundary */
	s->bitcnt = 0;
	if (s->pos + 4 > s->inlen)
		return -1;
	len = s->in[s->pos] | (unsigned int)s->in[s->pos + 1] << 8;
	if ((s->in[s->pos + 2] | (unsigned int)s->in[s->pos + 3] << 8) != (~len & 0xffff))
		return -1;
	s->pos += 4;
	if (s->pos + len > s->inlen)
		return -1;
	while (len--)
		if (put(s, s->in[s->pos++]))
			return -1;
	return 0;
}

static int fixed(struct inflate *s)
{
	struct huffman lencode, distcode;
	short lengths[288];
	int i;

	/* Rebuilt per block: cheap next to reading a file, and no shared state. */
	for (i = 0; i < 144; i++)
		lengths[i] = 8;
	for (; i < 256; i++)
		lengths[i] = 9;
	for (; i < 280; i++)
		lengths[i] = 7;
	for (; i < 288; i++)
		lengths[i] = 8;
	construct(&lencode, lengths, 288);
	for (i = 0; i < 30; i++)
		lengths[i] = 5;
	construct(&distcode, lengths, 30);
	return codes(s, &lencode, &distcode);
}

static int dynamic(struct inflate *s)
{
	static const short order[19] = { 16, 17, 18, 0, 8, 7, 9, 6, 10, 5,
					 11, 4, 12, 3, 13, 2, 14, 1, 15 };
	struct huffman lencode, distcode;
	short lengths[320];
	int nlen, ndist, ncode, index;

	nlen = (int)bits(s, 5) + 257;
	ndist = (int)bits(s, 5) + 1;
	ncode = (int)bits(s, 4) + 4;
	if (s->err || nlen > 286 || ndist > 30)
		return -1;
	for (index = 0; index < ncode; index++)
		lengths[order[index]] = (short)bits(s, 3);
	for (; index < 19; index++)
		lengths[order[index]] = 0;
	if (s->err || construct(&lencode, lengths, 19))
		return -1;
	for (index = 0; index < nlen + ndist;) {
		int sym = decode(s, &lencode), len = 0, rep;

		if (sym < 0)
			return -1;
		if (sym < 16) {
			lengths[index++] = (short)sym;
			continue;
		}
		if (sym == 16) {
			if (!index)
				return -1;
			len = lengths[index - 1];
			rep = 3 + (int)bits(s, 2);
		} else if (sym == 17) {
			rep = 3 + (int)bits(s, 3);
		} else {
			rep = 11 + (int)bits(s, 7);
		}
		if (s->err || index + rep > nlen + ndist)
			return -1;
		while (rep--)
			lengths[index++] = (short)len;
	}
	if (!lengths[256]) /* no end-of-block code */
		return -1;
	if (construct(&lencode, lengths, nlen) || construct(&distcode, lengths + nlen, ndist))
		return -1;
	return codes(s, &lencode, &distcode);
}

static uint32_t crc32_of(const unsigned char *p, size_t n)
{
	uint32_t crc = 0xffffffffu;

	while (n--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = crc >> 1 ^ (0xedb88320u & -(crc & 1));
	}
	return ~crc;
}

static uint32_t le32(const unsigned char *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/*
 * Decompress a gzip member into a NUL-terminated malloc'd buffer; 0 or -1
 * (bad or truncated data, a CRC or length mismatch, no memory).
 */
static int gunzip(const unsigned char *in, size_t inlen, char **out_p, size_t *outlen_p)
{
	struct inflate s = { .in = in, .inlen = inlen };
	unsigned int flags, last;

	if (inlen < 18 || in[0] != 0x1f || in[1] != 0x8b || in[2] != 8)
		return -1;
	flags = in[3];
	s.pos = 10;
	if (flags & 4) { /* FEXTRA */
		if (s.pos + 2 > inlen)
			return -1;
		s.pos += 2 + (in[s.pos] | (size_t)in[s.pos + 1] << 8);
	}
	for (unsigned int f = 8; f <= 16; f <<= 1) { /* FNAME, FCOMMENT */
		if (!(flags & f))
			continue;
		while (s.pos < inlen && in[s.pos])
			s.pos++;
		s.pos++;
	}
	if (flags & 2) /* FHCRC */
		s.pos += 2;
	if (s.pos >= inlen)
		return -1;
	do {
		unsigned int type;
		int err;

		last = bits(&s, 1);
		type = bits(&s, 2);
		if (s.err)
			break;
		err = type == 0 ? stored(&s) : type == 1 ? fixed(&s) : type == 2 ? dynamic(&s) : -1;
		if (err)
			s.err = 1;
	} while (!s.err && !last);
	/* The trailer: CRC-32 and length of the data, byte-aligned after the last block. */
	if (!s.err && (s.pos + 8 > inlen || le32(in + s.pos) != crc32_of(s.out, s.outlen) ||
		       le32(in + s.pos + 4) != (uint32_t)s.outlen))
		s.err = 1;
	if (s.err || !s.out) {
		free(s.out);
		return -1;
	}
	s.out[s.outlen] = '\0';
	*out_p = (char *)s.out;
	*outlen_p = s.outlen;
	return 0;
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

/* Read a configuration, plain or gzip; malloc'd text or NULL with @err set. */
static char *kconfig_read(const char *path, char *err, size_t errlen)
{
	char *raw, *text;
	size_t len, tlen;

	if (read_all(path, FILE_MAX, &raw, &len)) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return NULL;
	}
	if (len < 2 || (unsigned char)raw[0] != 0x1f || (unsigned char)raw[1] != 0x8b)
		return raw;
	if (gunzip((const unsigned char *)raw, len, &text, &tlen)) {
		snprintf(err, errlen, "%s is not valid gzip data", path);
		text = NULL;
	}
	free(raw);
	return text;
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
