// SPDX-License-Identifier: MIT
/*
 * plot.c - render a line chart into an RGB canvas and write it as PNG.
 *
 * The canvas is the PNG's raw scanline buffer itself (a filter byte of 0,
 * then 3 bytes a pixel, for each row), so encoding only wraps it in zlib
 * "stored" blocks: no compressor, no external library.  Drawing order makes
 * the layering: grid, data lines and markers, frame and labels, legend.
 *
 * No locking: every call works on its own canvas and buffers, and the only
 * static data are constant tables.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/plot.h"

#define DEFAULT_W 800
#define DEFAULT_H 500
/* Below this the margins for labels leave no room to plot in. */
#define MIN_W 200
#define MIN_H 150
/* Keeps the raw image under about 200 MB, so sizes never near overflow. */
#define MAX_DIM 8192
/* Longer strings are cut: they would leave the image anyway. */
#define MAX_TEXT 100

#define WHITE 0xffffffu
#define GRID 0xe2e2e2u
#define FRAME 0x404040u
#define TEXT 0x202020u
#define LEGEND_BORDER 0xa0a0a0u

#define TICK 5   /* length of a tick mark outside the frame */
#define MARK 2   /* marker half-size: a 5x5 square */
#define TSCALE 2 /* title font scale; everything else is drawn at 1 */

/*
 * 5x8 glyphs for ASCII 32..126, one byte per column, bit 0 the top row.
 * Rows 0-6 hold the glyph, row 7 only the descenders of g, j, p, q, y.
 */
#define FONT_W 5
#define FONT_H 8
#define FONT_ADV 6 /* a blank column between glyphs */
static const unsigned char font[95][FONT_W] = {
	{ 0x00, 0x00, 0x00, 0x00, 0x00 }, { 0x00, 0x00, 0x5f, 0x00, 0x00 }, /*   ! */
	{ 0x00, 0x07, 0x00, 0x07, 0x00 }, { 0x14, 0x7f, 0x14, 0x7f, 0x14 }, /* " # */
	{ 0x24, 0x2a, 0x7f, 0x2a, 0x12 }, { 0x23, 0x13, 0x08, 0x64, 0x62 }, /* $ % */
	{ 0x36, 0x49, 0x55, 0x22, 0x50 }, { 0x00, 0x05, 0x03, 0x00, 0x00 }, /* & ' */
	{ 0x00, 0x1c, 0x22, 0x41, 0x00 }, { 0x00, 0x41, 0x22, 0x1c, 0x00 }, /* ( ) */
	{ 0x08, 0x2a, 0x1c, 0x2a, 0x08 }, { 0x08, 0x08, 0x3e, 0x08, 0x08 }, /* * + */
	{ 0x00, 0x50, 0x30, 0x00, 0x00 }, { 0x08, 0x08, 0x08, 0x08, 0x08 }, /* , - */
	{ 0x00, 0x60, 0x60, 0x00, 0x00 }, { 0x20, 0x10, 0x08, 0x04, 0x02 }, /* . / */
	{ 0x3e, 0x51, 0x49, 0x45, 0x3e }, { 0x00, 0x42, 0x7f, 0x40, 0x00 }, /* 0 1 */
	{ 0x42, 0x61, 0x51, 0x49, 0x46 }, { 0x21, 0x41, 0x45, 0x4b, 0x31 }, /* 2 3 */
	{ 0x18, 0x14, 0x12, 0x7f, 0x10 }, { 0x27, 0x45, 0x45, 0x45, 0x39 }, /* 4 5 */
	{ 0x3c, 0x4a, 0x49, 0x49, 0x30 }, { 0x01, 0x71, 0x09, 0x05, 0x03 }, /* 6 7 */
	{ 0x36, 0x49, 0x49, 0x49, 0x36 }, { 0x06, 0x49, 0x49, 0x29, 0x1e }, /* 8 9 */
	{ 0x00, 0x36, 0x36, 0x00, 0x00 }, { 0x00, 0x56, 0x36, 0x00, 0x00 }, /* : ; */
	{ 0x08, 0x14, 0x22, 0x41, 0x00 }, { 0x14, 0x14, 0x14, 0x14, 0x14 }, /* < = */
	{ 0x00, 0x41, 0x22, 0x14, 0x08 }, { 0x02, 0x01, 0x51, 0x09, 0x06 }, /* > ? */
	{ 0x32, 0x49, 0x79, 0x41, 0x3e }, { 0x7e, 0x11, 0x11, 0x11, 0x7e }, /* @ A */
	{ 0x7f, 0x49, 0x49, 0x49, 0x36 }, { 0x3e, 0x41, 0x41, 0x41, 0x22 }, /* B C */
	{ 0x7f, 0x41, 0x41, 0x22, 0x1c }, { 0x7f, 0x49, 0x49, 0x49, 0x41 }, /* D E */
	{ 0x7f, 0x09, 0x09, 0x09, 0x01 }, { 0x3e, 0x41, 0x49, 0x49, 0x7a }, /* F G */
	{ 0x7f, 0x08, 0x08, 0x08, 0x7f }, { 0x00, 0x41, 0x7f, 0x41, 0x00 }, /* H I */
	{ 0x20, 0x40, 0x41, 0x3f, 0x01 }, { 0x7f, 0x08, 0x14, 0x22, 0x41 }, /* J K */
	{ 0x7f, 0x40, 0x40, 0x40, 0x40 }, { 0x7f, 0x02, 0x0c, 0x02, 0x7f }, /* L M */
	{ 0x7f, 0x04, 0x08, 0x10, 0x7f }, { 0x3e, 0x41, 0x41, 0x41, 0x3e }, /* N O */
	{ 0x7f, 0x09, 0x09, 0x09, 0x06 }, { 0x3e, 0x41, 0x51, 0x21, 0x5e }, /* P Q */
	{ 0x7f, 0x09, 0x19, 0x29, 0x46 }, { 0x46, 0x49, 0x49, 0x49, 0x31 }, /* R S */
	{ 0x01, 0x01, 0x7f, 0x01, 0x01 }, { 0x3f, 0x40, 0x40, 0x40, 0x3f }, /* T U */
	{ 0x1f, 0x20, 0x40, 0x20, 0x1f }, { 0x3f, 0x40, 0x38, 0x40, 0x3f }, /* V W */
	{ 0x63, 0x14, 0x08, 0x14, 0x63 }, { 0x07, 0x08, 0x70, 0x08, 0x07 }, /* X Y */
	{ 0x61, 0x51, 0x49, 0x45, 0x43 }, { 0x00, 0x7f, 0x41, 0x41, 0x00 }, /* Z [ */
	{ 0x02, 0x04, 0x08, 0x10, 0x20 }, { 0x00, 0x41, 0x41, 0x7f, 0x00 }, /* \ ] */
	{ 0x04, 0x02, 0x01, 0x02, 0x04 }, { 0x40, 0x40, 0x40, 0x40, 0x40 }, /* ^ _ */
	{ 0x00, 0x01, 0x02, 0x04, 0x00 }, { 0x20, 0x54, 0x54, 0x54, 0x78 }, /* ` a */
	{ 0x7f, 0x48, 0x44, 0x44, 0x38 }, { 0x38, 0x44, 0x44, 0x44, 0x20 }, /* b c */
	{ 0x38, 0x44, 0x44, 0x48, 0x7f }, { 0x38, 0x54, 0x54, 0x54, 0x18 }, /* d e */
	{ 0x08, 0x7e, 0x09, 0x01, 0x02 }, { 0x18, 0xa4, 0xa4, 0xa4, 0x7c }, /* f g */
	{ 0x7f, 0x08, 0x04, 0x04, 0x78 }, { 0x00, 0x44, 0x7d, 0x40, 0x00 }, /* h i */
	{ 0x40, 0x80, 0x84, 0x7d, 0x00 }, { 0x7f, 0x10, 0x28, 0x44, 0x00 }, /* j k */
	{ 0x00, 0x41, 0x7f, 0x40, 0x00 }, { 0x7c, 0x04, 0x18, 0x04, 0x78 }, /* l m */
	{ 0x7c, 0x08, 0x04, 0x04, 0x78 }, { 0x38, 0x44, 0x44, 0x44, 0x38 }, /* n o */
	{ 0xfc, 0x24, 0x24, 0x24, 0x18 }, { 0x18, 0x24, 0x24, 0x24, 0xfc }, /* p q */
	{ 0x7c, 0x08, 0x04, 0x04, 0x08 }, { 0x48, 0x54, 0x54, 0x54, 0x20 }, /* r s */
	{ 0x04, 0x3f, 0x44, 0x40, 0x20 }, { 0x3c, 0x40, 0x40, 0x20, 0x7c }, /* t u */
	{ 0x1c, 0x20, 0x40, 0x20, 0x1c }, { 0x3c, 0x40, 0x30, 0x40, 0x3c }, /* v w */
	{ 0x44, 0x28, 0x10, 0x28, 0x44 }, { 0x1c, 0xa0, 0xa0, 0xa0, 0x7c }, /* x y */
	{ 0x44, 0x64, 0x54, 0x4c, 0x44 }, { 0x00, 0x08, 0x36, 0x41, 0x00 }, /* z { */
	{ 0x00, 0x00, 0x7f, 0x00, 0x00 }, { 0x00, 0x41, 0x36, 0x08, 0x00 }, /* | } */
	{ 0x08, 0x04, 0x08, 0x10, 0x08 },                                   /* ~   */
};

/* Colours far enough apart to tell ten lines apart (the "tab10" set). */
static const uint32_t palette[] = {
	0x1f77b4, 0xd62728, 0x2ca02c, 0xff7f0e, 0x9467bd,
	0x8c564b, 0xe377c2, 0x17becf, 0x7f7f7f, 0xbcbd22,
};

uint32_t plot_series_rgb(size_t i)
{
	return palette[i % (sizeof(palette) / sizeof(palette[0]))];
}

struct canvas {
	unsigned char *raw; /* PNG scanlines: filter byte, then RGB RGB ... */
	size_t stride;      /* 1 + 3 * w */
	int w, h;
	int cx0, cy0, cx1, cy1; /* clip rectangle, inclusive, inside the image */
};

static void set_clip(struct canvas *c, int x0, int y0, int x1, int y1)
{
	c->cx0 = x0 < 0 ? 0 : x0;
	c->cy0 = y0 < 0 ? 0 : y0;
	c->cx1 = x1 >= c->w ? c->w - 1 : x1;
	c->cy1 = y1 >= c->h ? c->h - 1 : y1;
}

static void put(struct canvas *c, int x, int y, uint32_t rgb)
{
	unsigned char *px;

	if (x < c->cx0 || x > c->cx1 || y < c->cy0 || y > c->cy1)
		return;
	px = c->raw + (size_t)y * c->stride + 1 + (size_t)x * 3;
	px[0] = (unsigned char)(rgb >> 16);
	px[1] = (unsigned char)(rgb >> 8);
	px[2] = (unsigned char)rgb;
}

static uint32_t get(const struct canvas *c, int x, int y)
{
	const unsigned char *px = c->raw + (size_t)y * c->stride + 1 + (size_t)x * 3;

	return (uint32_t)px[0] << 16 | (uint32_t)px[1] << 8 | px[2];
}

static void fill(struct canvas *c, int x0, int y0, int x1, int y1, uint32_t rgb)
{
	for (int y = y0; y <= y1; y++)
		for (int x = x0; x <= x1; x++)
			put(c, x, y, rgb);
}

static void rect(struct canvas *c, int x0, int y0, int x1, int y1, uint32_t rgb)
{
	fill(c, x0, y0, x1, y0, rgb);
	fill(c, x0, y1, x1, y1, rgb);
	fill(c, x0, y0, x0, y1, rgb);
	fill(c, x1, y0, x1, y1, rgb);
}

static int text_width(const char *s, int scale)
{
	int n = 0;

	/* Not strnlen(): GCC flags its bound against short buffers at -O2. */
	while (s && n < MAX_TEXT && s[n])
		n++;
	return n ? (n * FONT_ADV - 1) * scale : 0;
}

/*
 * Draw @s with its top left corner at (@x, @y); @vertical turns it 90
 * degrees counter-clockwise, reading upwards from (@x, @y), its bottom left.
 */
static void text(struct canvas *c, int x, int y, const char *s, int scale, bool vertical,
		 uint32_t rgb)
{
	for (int i = 0; s && i < MAX_TEXT && s[i]; i++) {
		unsigned char ch = (unsigned char)s[i];
		const unsigned char *g = font[(ch >= 32 && ch <= 126 ? ch : '?') - 32];

		for (int col = 0; col < FONT_W; col++) {
			for (int row = 0; row < FONT_H; row++) {
				int u = (i * FONT_ADV + col) * scale, v = row * scale;

				if (!(g[col] >> row & 1))
					continue;
				if (vertical)
					fill(c, x + v, y - u - scale + 1, x + v + scale - 1, y - u,
					     rgb);
				else
					fill(c, x + u, y + v, x + u + scale - 1, y + v + scale - 1,
					     rgb);
			}
		}
	}
}

/* Bresenham, thickened by one pixel across the line's major direction. */
static void line(struct canvas *c, int x0, int y0, int x1, int y1, uint32_t rgb)
{
	int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
	int dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
	int err = dx + dy;
	bool flat = dx >= -dy;

	for (;;) {
		int e2 = 2 * err;

		put(c, x0, y0, rgb);
		put(c, x0 + !flat, y0 + flat, rgb);
		if (x0 == x1 && y0 == y1)
			break;
		if (e2 >= dy) {
			err += dy;
			x0 += sx;
		}
		if (e2 <= dx) {
			err += dx;
			y0 += sy;
		}
	}
}

/* Liang-Barsky: cut the segment to the rectangle; false when it misses. */
static bool clip_segment(double *x0, double *y0, double *x1, double *y1, double rx0, double ry0,
			 double rx1, double ry1)
{
	double dx = *x1 - *x0, dy = *y1 - *y0, t0 = 0, t1 = 1;
	double p[4] = { -dx, dx, -dy, dy };
	double q[4] = { *x0 - rx0, rx1 - *x0, *y0 - ry0, ry1 - *y0 };

	for (int i = 0; i < 4; i++) {
		double t;

		if (p[i] == 0) {
			if (q[i] < 0)
				return false;
			continue;
		}
		t = q[i] / p[i];
		if (p[i] < 0 && t > t0)
			t0 = t;
		else if (p[i] > 0 && t < t1)
			t1 = t;
		if (t0 > t1)
			return false;
	}
	*x1 = *x0 + t1 * dx;
	*y1 = *y0 + t1 * dy;
	*x0 += t0 * dx;
	*y0 += t0 * dy;
	return true;
}

/* An axis: its range and ticks at k * step for k0 <= k <= k1. */
struct axis {
	double min, max, step;
	long long k0, k1;
	int decimals;
};

/* Set up @a over [@lo, @hi]; @fit rounds the range out to whole ticks. */
static int axis_init(struct axis *a, double lo, double hi, bool fit)
{
	double rough, mag, norm;

	if (hi == lo) {
		double pad = lo == 0 ? 1 : fabs(lo) * 0.1;

		/* A range starting at 0 stays there: only widen upwards. */
		if (lo != 0)
			lo -= pad;
		hi += pad;
	}
	/* About 5 ticks, 1, 2 or 5 times a power of ten apart. */
	rough = (hi - lo) / 5;
	mag = pow(10, floor(log10(rough)));
	norm = rough / mag;
	a->step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
	/* Past 1e15 ticks per unit, k * step no longer tells ticks apart. */
	if (!isfinite(a->step) || !(a->step > 0) || fabs(lo / a->step) > 1e15 ||
	    fabs(hi / a->step) > 1e15)
		return -EINVAL;
	/* The slack absorbs rounding, so 0.3 / 0.1 counts as 3, not 3.0000001. */
	if (fit) {
		lo = floor(lo / a->step + 1e-9) * a->step;
		hi = ceil(hi / a->step - 1e-9) * a->step;
	}
	a->min = lo;
	a->max = hi;
	a->k0 = (long long)ceil(lo / a->step - 1e-9);
	a->k1 = (long long)floor(hi / a->step + 1e-9);
	a->decimals = a->step >= 1 ? 0 : (int)ceil(-log10(a->step) - 1e-9);
	return 0;
}

static void tick_label(char *buf, size_t size, const struct axis *a, long long k)
{
	double v = (double)k * a->step;

	if (fabs(v) >= 1e7 || a->decimals > 6)
		snprintf(buf, size, "%g", v);
	else
		snprintf(buf, size, "%.*f", a->decimals, v);
}

static double map(double v, const struct axis *a, int p0, int p1)
{
	double t = p0 + (v - a->min) / (a->max - a->min) * (p1 - p0);

	/* Far-off points only need the right direction, not the distance. */
	return fmin(fmax(t, -1e9), 1e9);
}

static void draw_legend(struct canvas *c, const struct plot *p, int x0, int y0, int x1, int y1)
{
	const int pad = 7, gap = 6, sw = 22, rowh = FONT_H + gap;
	size_t n = p->nseries, shown = n, i;
	int w = 0, h, best = -1, bx = 0, by = 0, fit = (y1 - y0 - 16 - 2 * pad + gap) / rowh;
	char more[32], name[32];

	/* Too many series for the plot area's height: list what fits. */
	if (fit < 1)
		fit = 1;
	if (n > (size_t)fit) {
		shown = (size_t)fit - 1;
		snprintf(more, sizeof(more), "+%zu more", n - shown);
		w = text_width(more, 1) - sw - gap;
	}
	for (i = 0; i < shown; i++) {
		const char *s = p->series[i].name;

		if (!s) {
			snprintf(name, sizeof(name), "series %zu", i);
			s = name;
		}
		if (text_width(s, 1) > w)
			w = text_width(s, 1);
	}
	w += 2 * pad + sw + gap;
	h = 2 * pad + (int)(shown + (shown < n)) * rowh - gap;

	/* The corner where the box hides the fewest drawn pixels wins. */
	for (int corner = 0; corner < 4; corner++) {
		int cx = corner & 1 ? x0 + 8 : x1 - 8 - w;
		int cy = corner & 2 ? y1 - 8 - h : y0 + 8;
		int ink = 0;

		for (int y = cy; y <= cy + h; y++)
			for (int x = cx; x <= cx + w; x++)
				if (x >= 0 && y >= 0 && x < c->w && y < c->h &&
				    get(c, x, y) != WHITE && get(c, x, y) != GRID)
					ink++;
		if (best < 0 || ink < best) {
			best = ink;
			bx = cx;
			by = cy;
		}
	}

	fill(c, bx, by, bx + w, by + h, WHITE);
	rect(c, bx, by, bx + w, by + h, LEGEND_BORDER);
	for (i = 0; i < shown; i++) {
		int ty = by + pad + (int)i * rowh, my = ty + FONT_H / 2 - 1;
		uint32_t rgb = plot_series_rgb(i);
		const char *s = p->series[i].name;

		if (!s) {
			snprintf(name, sizeof(name), "series %zu", i);
			s = name;
		}
		line(c, bx + pad, my, bx + pad + sw - 1, my, rgb);
		fill(c, bx + pad + sw / 2 - MARK, my - MARK + 1, bx + pad + sw / 2 + MARK,
		     my + MARK + 1, rgb);
		text(c, bx + pad + sw + gap, ty, s, 1, false, TEXT);
	}
	if (shown < n)
		text(c, bx + pad, by + pad + (int)shown * rowh, more, 1, false, TEXT);
}

static void draw_series(struct canvas *c, const struct plot_series *s, uint32_t rgb,
			const struct axis *ax, const struct axis *ay, int x0, int y0, int x1,
			int y1)
{
	double px = 0, py = 0;
	bool prev = false;

	/* Lines may reach one pixel past the frame so edge lines keep 2 px. */
	set_clip(c, x0 - 1, y0 - 1, x1 + 1, y1 + 1);
	for (size_t i = 0; i < s->n; i++) {
		double qx, qy, ax0, ay0, ax1, ay1;

		if (!isfinite(s->x[i]) || !isfinite(s->y[i])) {
			prev = false;
			continue;
		}
		qx = map(s->x[i], ax, x0, x1);
		qy = map(s->y[i], ay, y1, y0);
		ax0 = px, ay0 = py, ax1 = qx, ay1 = qy;
		if (prev && clip_segment(&ax0, &ay0, &ax1, &ay1, x0 - 1, y0 - 1, x1 + 1, y1 + 1))
			line(c, (int)lround(ax0), (int)lround(ay0), (int)lround(ax1),
			     (int)lround(ay1), rgb);
		px = qx, py = qy, prev = true;
	}
	/* Markers of points inside the axes' range, whole even on the frame. */
	set_clip(c, x0 - MARK, y0 - MARK, x1 + MARK, y1 + MARK);
	for (size_t i = 0; i < s->n; i++) {
		long mx, my;

		if (!isfinite(s->x[i]) || !isfinite(s->y[i]))
			continue;
		mx = lround(map(s->x[i], ax, x0, x1));
		my = lround(map(s->y[i], ay, y1, y0));
		if (mx >= x0 && mx <= x1 && my >= y0 && my <= y1)
			fill(c, (int)mx - MARK, (int)my - MARK, (int)mx + MARK, (int)my + MARK,
			     rgb);
	}
}

static int render(const struct plot *p, struct canvas *c)
{
	double dx0 = INFINITY, dx1 = -INFINITY, dy0 = INFINITY, dy1 = -INFINITY;
	bool autox = p->xmin == p->xmax, autoy = p->ymin == p->ymax;
	int x0, y0, x1, y1, wy = 0, err;
	struct axis ax, ay;
	char buf[32];

	for (size_t s = 0; s < p->nseries; s++) {
		const struct plot_series *ps = &p->series[s];

		for (size_t i = 0; i < ps->n; i++) {
			if (!isfinite(ps->x[i]) || !isfinite(ps->y[i]))
				continue;
			dx0 = fmin(dx0, ps->x[i]);
			dx1 = fmax(dx1, ps->x[i]);
			dy0 = fmin(dy0, ps->y[i]);
			dy1 = fmax(dy1, ps->y[i]);
		}
	}
	if (dx0 > dx1)
		return -EINVAL;
	if (dy0 > 0)
		dy0 = 0;
	err = axis_init(&ax, autox ? dx0 : p->xmin, autox ? dx1 : p->xmax, autox);
	if (!err)
		err = axis_init(&ay, autoy ? dy0 : p->ymin, autoy ? dy1 : p->ymax, autoy);
	if (err)
		return err;

	/* Margins: room for the title, the tick labels and the axis labels. */
	for (long long k = ay.k0; k <= ay.k1; k++) {
		tick_label(buf, sizeof(buf), &ay, k);
		if (text_width(buf, 1) > wy)
			wy = text_width(buf, 1);
	}
	tick_label(buf, sizeof(buf), &ax, ax.k1);
	x0 = 10 + (p->ylabel && *p->ylabel ? FONT_H + 10 : 0) + wy + 6 + TICK;
	x1 = c->w - 1 - (text_width(buf, 1) / 2 + 12 > 20 ? text_width(buf, 1) / 2 + 12 : 20);
	y0 = p->title && *p->title ? 12 + FONT_H * TSCALE + 12 : 16;
	y1 = c->h - 1 - (TICK + 6 + FONT_H + (p->xlabel && *p->xlabel ? 10 + FONT_H : 0) + 8);
	if (x1 - x0 < 40 || y1 - y0 < 40)
		return -EINVAL;

	set_clip(c, x0, y0, x1, y1);
	for (long long k = ax.k0; k <= ax.k1; k++) {
		int x = (int)lround(map((double)k * ax.step, &ax, x0, x1));

		fill(c, x, y0, x, y1, GRID);
	}
	for (long long k = ay.k0; k <= ay.k1; k++) {
		int y = (int)lround(map((double)k * ay.step, &ay, y1, y0));

		fill(c, x0, y, x1, y, GRID);
	}
	set_clip(c, 0, 0, c->w - 1, c->h - 1);
	rect(c, x0, y0, x1, y1, FRAME);
	for (size_t s = 0; s < p->nseries; s++)
		draw_series(c, &p->series[s], plot_series_rgb(s), &ax, &ay, x0, y0, x1, y1);

	set_clip(c, 0, 0, c->w - 1, c->h - 1);
	for (long long k = ax.k0; k <= ax.k1; k++) {
		int x = (int)lround(map((double)k * ax.step, &ax, x0, x1));

		fill(c, x, y1 + 1, x, y1 + TICK, FRAME);
		tick_label(buf, sizeof(buf), &ax, k);
		text(c, x - text_width(buf, 1) / 2, y1 + TICK + 5, buf, 1, false, TEXT);
	}
	for (long long k = ay.k0; k <= ay.k1; k++) {
		int y = (int)lround(map((double)k * ay.step, &ay, y1, y0));

		fill(c, x0 - TICK, y, x0 - 1, y, FRAME);
		tick_label(buf, sizeof(buf), &ay, k);
		text(c, x0 - TICK - 4 - text_width(buf, 1), y - 3, buf, 1, false, TEXT);
	}
	/* Labels too long to centre start at the image's edge and lose their end. */
	if (p->xlabel) {
		int x = (x0 + x1) / 2 - text_width(p->xlabel, 1) / 2;

		text(c, x < 4 ? 4 : x, y1 + TICK + 6 + FONT_H + 10, p->xlabel, 1, false, TEXT);
	}
	if (p->ylabel) {
		int y = (y0 + y1) / 2 + text_width(p->ylabel, 1) / 2;

		text(c, 10, y > c->h - 5 ? c->h - 5 : y, p->ylabel, 1, true, TEXT);
	}
	if (p->title) {
		int ts = text_width(p->title, TSCALE) <= c->w - 8 ? TSCALE : 1;
		int x = c->w / 2 - text_width(p->title, ts) / 2;

		text(c, x < 4 ? 4 : x, 12 + FONT_H * (TSCALE - ts) / 2, p->title, ts, false, TEXT);
	}
	draw_legend(c, p, x0, y0, x1, y1);
	return 0;
}

static uint32_t crc32(const unsigned char *d, size_t n, const uint32_t *table)
{
	uint32_t crc = 0xffffffffu;

	while (n--)
		crc = table[(crc ^ *d++) & 0xff] ^ crc >> 8;
	return crc ^ 0xffffffffu;
}

static uint32_t adler32(const unsigned char *d, size_t n)
{
	uint32_t a = 1, b = 0;

	while (n) {
		/* 5552 bytes is the most that cannot overflow b before the modulo. */
		size_t k = n < 5552 ? n : 5552;

		n -= k;
		while (k--) {
			a += *d++;
			b += a;
		}
		a %= 65521;
		b %= 65521;
	}
	return b << 16 | a;
}

static unsigned char *be32(unsigned char *o, uint32_t v)
{
	o[0] = (unsigned char)(v >> 24);
	o[1] = (unsigned char)(v >> 16);
	o[2] = (unsigned char)(v >> 8);
	o[3] = (unsigned char)v;
	return o + 4;
}

/* Close the chunk whose length field is at @start; @o is its data's end. */
static unsigned char *end_chunk(unsigned char *start, unsigned char *o, const uint32_t *table)
{
	be32(start, (uint32_t)(o - start - 8));
	return be32(o, crc32(start + 4, (size_t)(o - start - 4), table));
}

static unsigned char *encode(const struct canvas *c, size_t *len_p)
{
	static const unsigned char sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	size_t raw = c->stride * (size_t)c->h, nblk = (raw + 65534) / 65535;
	size_t len = 8 + 25 + 12 + (2 + 5 * nblk + raw + 4) + 12;
	unsigned char *png = malloc(len), *o, *start;
	uint32_t table[256];

	if (!png)
		return NULL;
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t v = i;

		for (int k = 0; k < 8; k++)
			v = v & 1 ? 0xedb88320u ^ v >> 1 : v >> 1;
		table[i] = v;
	}
	memcpy(png, sig, 8);
	start = png + 8;
	o = start + 4;
	memcpy(o, "IHDR", 4);
	o = be32(o + 4, (uint32_t)c->w);
	o = be32(o, (uint32_t)c->h);
	memcpy(o, "\x08\x02\x00\x00\x00", 5); /* 8 bit, RGB, deflate, filter 0, no interlace */
	o = end_chunk(start, o + 5, table);

	start = o;
	o += 4;
	memcpy(o, "IDAT\x78\x01", 6); /* zlib: deflate, 32K window, no dictionary */
	o += 6;
	for (size_t off = 0; off < raw;) {
		size_t n = raw - off < 65535 ? raw - off : 65535;

		*o++ = off + n == raw; /* BFINAL, BTYPE 00: stored */
		*o++ = (unsigned char)n;
		*o++ = (unsigned char)(n >> 8);
		*o++ = (unsigned char)~n;
		*o++ = (unsigned char)(~n >> 8);
		memcpy(o, c->raw + off, n);
		o += n;
		off += n;
	}
	o = be32(o, adler32(c->raw, raw));
	o = end_chunk(start, o, table);

	start = o;
	memcpy(o + 4, "IEND", 4);
	o = end_chunk(start, o + 8, table);
	*len_p = (size_t)(o - png);
	return png;
}

/* An explicit range must be finite and increasing; lo == hi asks for auto. */
static bool bad_range(double lo, double hi)
{
	return lo != hi && !(isfinite(lo) && isfinite(hi) && lo < hi);
}

int plot_png_mem(const struct plot *p, unsigned char **png_p, size_t *len_p)
{
	struct canvas c;
	unsigned char *png;
	size_t len;
	int err;

	if (!p || !png_p || !len_p || !p->series || !p->nseries)
		return -EINVAL;
	for (size_t s = 0; s < p->nseries; s++)
		if (p->series[s].n && (!p->series[s].x || !p->series[s].y))
			return -EINVAL;
	c.w = p->width ? (int)(p->width > MAX_DIM ? MAX_DIM + 1 : p->width) : DEFAULT_W;
	c.h = p->height ? (int)(p->height > MAX_DIM ? MAX_DIM + 1 : p->height) : DEFAULT_H;
	if (c.w < MIN_W || c.w > MAX_DIM || c.h < MIN_H || c.h > MAX_DIM)
		return -EINVAL;
	if (bad_range(p->xmin, p->xmax) || bad_range(p->ymin, p->ymax))
		return -EINVAL;

	c.stride = 1 + 3 * (size_t)c.w;
	/* All 0xff: white pixels; the filter bytes are zeroed below. */
	c.raw = malloc(c.stride * (size_t)c.h);
	if (!c.raw)
		return -ENOMEM;
	memset(c.raw, 0xff, c.stride * (size_t)c.h);
	for (int y = 0; y < c.h; y++)
		c.raw[(size_t)y * c.stride] = 0;
	set_clip(&c, 0, 0, c.w - 1, c.h - 1);

	err = render(p, &c);
	if (err)
		goto err_render;
	png = encode(&c, &len);
	if (!png) {
		err = -ENOMEM;
		goto err_render;
	}
	free(c.raw);
	*png_p = png;
	*len_p = len;
	return 0;

err_render:
	free(c.raw);
	return err;
}

int plot_png(const char *path, const struct plot *p)
{
	unsigned char *png;
	size_t len, off = 0;
	char *tmp;
	int fd, err;

	if (!path || !*path)
		return -EINVAL;
	err = plot_png_mem(p, &png, &len);
	if (err)
		return err;
	tmp = malloc(strlen(path) + sizeof(".tmp.XXXXXX"));
	if (!tmp) {
		err = -ENOMEM;
		goto err_tmp;
	}
	/* Same directory as @path, so rename() replaces it atomically. */
	sprintf(tmp, "%s.tmp.XXXXXX", path);
	fd = mkstemp(tmp);
	if (fd < 0) {
		err = -errno;
		goto err_open;
	}
	/* mkstemp() makes it 0600; a failure here leaves it so, still usable. */
	(void)fchmod(fd, 0644);
	while (off < len) {
		ssize_t n = write(fd, png + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : -EIO;
			break;
		}
		off += (size_t)n;
	}
	/* close() can report a deferred write error (NFS, quotas). */
	if (close(fd) && !err)
		err = -errno;
	if (!err && rename(tmp, path))
		err = -errno;
	if (err)
		unlink(tmp);
err_open:
	free(tmp);
err_tmp:
	free(png);
	return err;
}
