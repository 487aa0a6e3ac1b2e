// SPDX-License-Identifier: MIT
/*
 * plot.c - the PNG chart writer of the tools: plot_png_mem() and plot_png().
 *
 * The PNG is checked with a decoder of our own (chunk CRCs, a stored-block
 * inflater, Adler-32), independent of the writer's code.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/plot.h"
#include "tests/tap/basic.h"

struct png {
	unsigned w, h, depth, ctype;
	bool sig_ok, crc_ok, ihdr_first, iend_last;
	const char *inflate_err; /* NULL when IDAT inflated and Adler-32 matched */
	unsigned char *raw;      /* inflated scanlines */
	size_t rawlen;
};

static uint32_t rd32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Bitwise CRC-32 (ISO 3309), slow on purpose: nothing shared with the writer. */
static uint32_t crc32_bitwise(const unsigned char *d, size_t n)
{
	uint32_t crc = 0xffffffffu;

	for (size_t i = 0; i < n; i++) {
		crc ^= d[i];
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1)));
	}
	return ~crc;
}

/* Inflate a zlib stream of stored blocks only; returns an error or NULL. */
static const char *inflate_stored(const unsigned char *z, size_t n, unsigned char **out_p,
				  size_t *outlen_p)
{
	unsigned char *out = NULL;
	size_t outlen = 0, pos = 2;
	uint32_t a = 1, b = 0;
	bool final = false;

	if (n < 6 || (z[0] & 0x0f) != 8 || (z[0] << 8 | z[1]) % 31 || (z[1] & 0x20))
		return "bad zlib header";
	while (!final) {
		unsigned len, nlen;
		unsigned char *grown;

		if (pos + 5 > n)
			return "truncated block header";
		if ((z[pos] >> 1 & 3) != 0) {
			free(out);
			return "not a stored block";
		}
		final = z[pos] & 1;
		len = z[pos + 1] | z[pos + 2] << 8;
		nlen = z[pos + 3] | z[pos + 4] << 8;
		pos += 5;
		if ((len ^ 0xffff) != nlen || pos + len > n) {
			free(out);
			return "bad stored length";
		}
		grown = realloc(out, outlen + len + 1);
		if (!grown) {
			free(out);
			return "out of memory";
		}
		out = grown;
		memcpy(out + outlen, z + pos, len);
		outlen += len;
		pos += len;
	}
	for (size_t i = 0; i < outlen; i++) {
		a = (a + out[i]) % 65521;
		b = (b + a) % 65521;
	}
	if (pos + 4 != n || rd32(z + pos) != (b << 16 | a)) {
		free(out);
		return "bad Adler-32 or trailing data";
	}
	*out_p = out;
	*outlen_p = outlen;
	return NULL;
}

static void png_parse(const unsigned char *d, size_t n, struct png *png)
{
	static const unsigned char sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	unsigned char *idat = NULL;
	size_t idatlen = 0, pos = 8;
	int nchunks = 0;

	memset(png, 0, sizeof(*png));
	png->inflate_err = "no IDAT";
	png->sig_ok = n >= 8 && !memcmp(d, sig, 8);
	if (!png->sig_ok)
		return;
	png->crc_ok = true;
	while (pos + 12 <= n) {
		uint32_t len = rd32(d + pos);
		const unsigned char *type = d + pos + 4, *data = d + pos + 8;

		if (len > n - pos - 12) {
			png->crc_ok = false;
			break;
		}
		if (crc32_bitwise(type, len + 4) != rd32(data + len))
			png->crc_ok = false;
		if (!memcmp(type, "IHDR", 4) && len == 13) {
			png->ihdr_first = nchunks == 0;
			png->w = rd32(data);
			png->h = rd32(data + 4);
			png->depth = data[8];
			png->ctype = data[9];
		} else if (!memcmp(type, "IDAT", 4)) {
			unsigned char *grown = realloc(idat, idatlen + len + 1);

			if (!grown)
				break;
			idat = grown;
			memcpy(idat + idatlen, data, len);
			idatlen += len;
		}
		pos += 12 + len;
		nchunks++;
		if (!memcmp(type, "IEND", 4)) {
			png->iend_last = pos == n;
			break;
		}
	}
	if (idat)
		png->inflate_err = inflate_stored(idat, idatlen, &png->raw, &png->rawlen);
	free(idat);
}

/* Sound structure, right size, filter bytes 0: the writer's whole contract. */
static bool png_valid(const struct png *png)
{
	if (!png->sig_ok || !png->crc_ok || !png->ihdr_first || !png->iend_last ||
	    png->inflate_err || png->depth != 8 || png->ctype != 2 ||
	    png->rawlen != (size_t)png->h * (1 + 3 * (size_t)png->w))
		return false;
	for (unsigned y = 0; y < png->h; y++)
		if (png->raw[(size_t)y * (1 + 3 * (size_t)png->w)])
			return false;
	return true;
}

static uint32_t pixel(const struct png *png, unsigned x, unsigned y)
{
	const unsigned char *p = png->raw + (size_t)y * (1 + 3 * (size_t)png->w) + 1 + 3 * x;

	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static size_t count_rgb(const struct png *png, uint32_t rgb)
{
	size_t n = 0;

	for (unsigned y = 0; y < png->h; y++)
		for (unsigned x = 0; x < png->w; x++)
			n += pixel(png, x, y) == rgb;
	return n;
}

static unsigned char *read_file(const char *path, size_t *len_p)
{
	FILE *f = fopen(path, "rb");
	unsigned char *d = NULL;
	long len;

	if (!f)
		return NULL;
	if (!fseek(f, 0, SEEK_END) && (len = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET)) {
		d = malloc((size_t)len + 1);
		if (d && fread(d, 1, (size_t)len, f) != (size_t)len) {
			free(d);
			d = NULL;
		}
		*len_p = (size_t)len;
	}
	fclose(f);
	return d;
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

/* Render @p to memory; true when it succeeded and decodes as a valid PNG. */
static bool renders(const struct plot *p, uint32_t must_have_rgb)
{
	unsigned char *d;
	struct png png;
	size_t len;
	bool good;

	if (plot_png_mem(p, &d, &len))
		return false;
	png_parse(d, len, &png);
	good = png_valid(&png) && count_rgb(&png, must_have_rgb) > 0;
	free(png.raw);
	free(d);
	return good;
}

int main(void)
{
	static const double share[] = { 0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100 };
	static const double dev_first[] = { 1520, 1490, 880, 540, 330, 205, 140, 95, 62, 40, 27 };
	static const double host_only[] = { 26, 26, 25.5, 25.8, 26, 25.9, 26.1, 25.7, 26, 26, 26 };
	const double nan_y[] = { 10, 12, NAN, 15, 17, NAN, NAN, 20, NAN, 22, 21 };
	const double one_x[] = { 0.5 }, one_y[] = { 3.25 }, all_nan[] = { NAN, NAN };
	static const double neg_y[] = { -3, 2, -1, 4, -2, 1, 0, 5, -4, 3, -5 };
	const struct plot_series series[] = {
		{ "device-first", share, dev_first, 11 },
		{ "host-only", share, host_only, 11 },
	};
	struct plot p = {
		.title = "Bandwidth vs buffer share beyond device memory",
		.xlabel = "share of buffer beyond device memory (%)",
		.ylabel = "bandwidth (GB/s)",
		.series = series,
		.nseries = 2,
	};
	struct plot_series other = { "x", share, nan_y, 11 };
	struct plot q;
	char dir[] = "/tmp/plot-test-XXXXXX", path[64];
	unsigned char *mem, *file, *untouched = (unsigned char *)"sentinel", *out = untouched;
	size_t len, flen = 0, outlen = 12345;
	struct png png;
	int err;

	plan(38);

	err = plot_png_mem(&p, &mem, &len);
	is_int(0, err, "plot_png_mem: renders a 2-series chart");
	if (err)
		bail("plot_png_mem failed: %s", strerror(-err));
	png_parse(mem, len, &png);
	ok(png.sig_ok, "plot_png_mem: PNG signature");
	ok(png.ihdr_first, "plot_png_mem: IHDR is the first chunk");
	is_uint(800, png.w, "plot_png_mem: default width 800");
	is_uint(500, png.h, "plot_png_mem: default height 500");
	is_uint(8, png.depth, "plot_png_mem: bit depth 8");
	is_uint(2, png.ctype, "plot_png_mem: colour type 2 (RGB)");
	ok(png.crc_ok, "plot_png_mem: every chunk's CRC-32 is valid");
	ok(png.iend_last, "plot_png_mem: IEND ends the file");
	ok(!png.inflate_err, "plot_png_mem: IDAT inflates, Adler-32 valid (%s)",
	   png.inflate_err ? png.inflate_err : "ok");
	is_uint(500 * (1 + 3 * 800), png.rawlen, "plot_png_mem: inflated size height*(1+3*width)");
	ok(png_valid(&png), "plot_png_mem: every row has filter byte 0");
	if (png_valid(&png)) {
		is_uint(0xffffff, pixel(&png, 0, 0), "plot_png_mem: top left corner is white");
		is_uint(0xffffff, pixel(&png, 799, 499),
			"plot_png_mem: bottom right corner is white");
		/* More than the legend's swatch: the line itself was drawn. */
		ok(count_rgb(&png, plot_series_rgb(0)) > 300,
		   "plot_png_mem: series 0 colour drawn");
		ok(count_rgb(&png, plot_series_rgb(1)) > 300,
		   "plot_png_mem: series 1 colour drawn");
		is_uint(0, count_rgb(&png, plot_series_rgb(2)),
			"plot_png_mem: no third series colour");
	} else {
		for (int i = 0; i < 5; i++)
			skip("no valid image to look at");
	}
	ok(plot_series_rgb(0) != plot_series_rgb(1) && plot_series_rgb(0) == plot_series_rgb(10),
	   "plot_series_rgb: distinct colours, palette repeats after 10");
	free(png.raw);

	if (!mkdtemp(dir))
		bail("mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/chart.png", dir);
	is_int(0, plot_png(path, &p), "plot_png: writes the file");
	file = read_file(path, &flen);
	ok(file && flen == len && !memcmp(file, mem, len),
	   "plot_png: file equals plot_png_mem bytes");
	free(file);
	is_int(0, plot_png(path, &p), "plot_png: replaces an existing file");
	is_int(1, count_entries(dir), "plot_png: no temporary file left in the directory");
	unlink(path);
	rmdir(dir);

	q = p;
	q.nseries = 0;
	is_int(-EINVAL, plot_png_mem(&q, &out, &outlen), "plot_png_mem: no series -> -EINVAL");
	ok(out == untouched && outlen == 12345, "plot_png_mem: outputs untouched on failure");
	q.nseries = 1;
	q.series = NULL;
	is_int(-EINVAL, plot_png_mem(&q, &out, &outlen), "plot_png_mem: NULL series -> -EINVAL");
	is_int(-EINVAL, plot_png_mem(NULL, &out, &outlen), "plot_png_mem: NULL plot -> -EINVAL");
	is_int(-EINVAL, plot_png(NULL, &p), "plot_png: NULL path -> -EINVAL");
	is_int(-ENOENT, plot_png("/nonexistent/dir/x.png", &p),
	       "plot_png: missing directory -> -ENOENT");
	ok(access("/nonexistent/dir/x.png", F_OK) && access("/nonexistent", F_OK),
	   "plot_png: failed write leaves no file");

	q = p;
	q.width = 100;
	is_int(-EINVAL, plot_png_mem(&q, &out, &outlen), "plot_png_mem: width 100 -> -EINVAL");
	q = p;
	q.xmin = 5;
	q.xmax = 1;
	is_int(-EINVAL, plot_png_mem(&q, &out, &outlen), "plot_png_mem: xmin > xmax -> -EINVAL");
	q = p;
	other.y = all_nan;
	other.n = 2;
	q.series = &other;
	q.nseries = 1;
	is_int(-EINVAL, plot_png_mem(&q, &out, &outlen), "plot_png_mem: NaN-only data -> -EINVAL");

	other.y = nan_y;
	other.n = 11;
	ok(renders(&q, plot_series_rgb(0)), "plot_png_mem: a series with NaN values renders");
	other.x = one_x;
	other.y = one_y;
	other.n = 1;
	ok(renders(&q, plot_series_rgb(0)), "plot_png_mem: auto range from a single point");
	/* Explicit ranges that cut most points off; odd size. */
	q = p;
	q.width = 333;
	q.height = 222;
	q.xmin = 25;
	q.xmax = 55;
	q.ymin = 100;
	q.ymax = 700;
	ok(renders(&q, plot_series_rgb(0)), "plot_png_mem: explicit ranges clip to the plot area");
	q = p;
	q.title = q.xlabel = q.ylabel = NULL;
	q.series = (const struct plot_series[]){ { NULL, share, dev_first, 11 } };
	q.nseries = 1;
	ok(renders(&q, plot_series_rgb(0)), "plot_png_mem: no labels, unnamed series");
	q = p;
	q.series = (const struct plot_series[]){ { "neg", share, neg_y, 11 } };
	q.nseries = 1;
	ok(renders(&q, plot_series_rgb(0)), "plot_png_mem: negative y values");
	q = p;
	q.height = 150;
	{
		struct plot_series many[40];

		for (int i = 0; i < 40; i++)
			many[i] = (struct plot_series){ NULL, share, dev_first, 11 };
		q.series = many;
		q.nseries = 40;
		ok(renders(&q, plot_series_rgb(39)), "plot_png_mem: 40 series in a small image");
	}

	free(mem);
	return tap_done();
}
