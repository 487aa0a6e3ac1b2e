/* SPDX-License-Identifier: MIT */
/*
 * plot.h - a small self-contained PNG line-chart writer for the experiment
 * tools (vmmx-place --plot): one line per series over shared x and y axes,
 * with ticks, grid, title, axis labels and a legend.
 *
 * No external library: the PNG is 8-bit RGB written with uncompressed
 * ("stored") deflate blocks, so files are large (about 3 bytes a pixel)
 * but need nothing beyond libc and libm.
 *
 * Not part of libvmmx: no vmmx_ prefix, errors are plain negative errno
 * values.
 */
#ifndef TOOLS_PLOT_H
#define TOOLS_PLOT_H

#include <stddef.h>
#include <stdint.h>

/**
 * struct plot_series - one line of the chart.
 * @name: legend text (printable ASCII; others drawn as '?'); NULL: "series N".
 * @x: @n x values.
 * @y: @n y values; a point whose x or y is NaN or infinite is skipped and
 *     breaks the line.
 * @n: number of points; may be 0 (the series only appears in the legend).
 */
struct plot_series {
	const char *name;
	const double *x;
	const double *y;
	size_t n;
};

/**
 * struct plot - a chart.
 * @title: drawn centred above the plot area; NULL or "": none.
 * @xlabel: drawn under the x axis; NULL or "": none.
 * @ylabel: drawn vertically left of the y axis; NULL or "": none.
 * @series: @nseries series, drawn in order, each in its palette colour
 *          (plot_series_rgb()).
 * @nseries: number of series, at least 1.
 * @width: image width in pixels, 0 for 800; else 160..8192.
 * @height: image height in pixels, 0 for 500; else 120..8192.
 * @xmin: lower end of the x axis.
 * @xmax: upper end of the x axis; @xmin == @xmax: both chosen from the data,
 *        rounded out to ticks.
 * @ymin: lower end of the y axis.
 * @ymax: upper end of the y axis; @ymin == @ymax: chosen from the data, from
 *        0 when no y value is negative.
 */
struct plot {
	const char *title;
	const char *xlabel;
	const char *ylabel;
	const struct plot_series *series;
	size_t nseries;
	unsigned width, height;
	double xmin, xmax, ymin, ymax;
};

/**
 * plot_series_rgb() - colour of a series.
 * @i: series index; the palette of 10 colours repeats.
 *
 * Return: the colour as 0xRRGGBB.
 *
 * Context: any thread.
 */
uint32_t plot_series_rgb(size_t i);

/**
 * plot_png_mem() - render a chart as PNG into memory.
 * @p: the chart.
 * @png_p: out; a malloc'd buffer holding the PNG file, for the caller to free.
 * @len_p: out; its length in bytes.
 *
 * Points outside an explicit axis range are clipped to the plot area.
 *
 * Return: 0; -EINVAL for a NULL argument, no series, a series with points
 * but a NULL @x or @y, no finite point in any series, a size out of range,
 * or an explicit range that is not finite or has min > max; -ENOMEM when
 * memory runs out.  @png_p and @len_p are written only on success.
 *
 * Context: any thread (no global state); allocates about 6 bytes a pixel.
 */
int plot_png_mem(const struct plot *p, unsigned char **png_p, size_t *len_p);

/**
 * plot_png() - render a chart as a PNG file.
 * @path: file to write; replaced atomically (a temporary file in the same
 *        directory, then rename()), so readers see the old file or the whole
 *        new one, and a failure leaves no partial or temporary file behind.
 * @p: the chart.
 *
 * Return: 0; -EINVAL for a NULL @path or the errors of plot_png_mem();
 * -ENOMEM; or the negative errno of creating, writing, closing or renaming
 * the file (-ENOENT for a missing directory, -EACCES, -ENOSPC, -EIO...).
 *
 * Context: any thread; blocks on file I/O.  The file is not fsync()ed.
 */
int plot_png(const char *path, const struct plot *p);

#endif
