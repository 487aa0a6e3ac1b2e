// SPDX-License-Identifier: MIT
/*
 * trace.c - VMMX_TRACE: one JSON object per placement decision, appended
 * to a file, so experiments can replay what the policy chose and why.
 *
 * Each record is formatted in full, then written with one write() to a
 * descriptor opened with O_APPEND, so records from several threads (and
 * several processes) never interleave.  A failed write is dropped on
 * purpose: tracing never fails an allocation.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

int vmmx__trace_open(struct vmmx_ctx *ctx)
{
	if (!ctx->conf.trace[0])
		return 0;
	ctx->trace_fd = open(ctx->conf.trace, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (ctx->trace_fd < 0)
		return vmmx__fail(&ctx->conf.log, -VMMX_ECONFIG, "VMMX_TRACE=\"%s\": cannot open: %s",
				  ctx->conf.trace, strerror(errno));
	return 0;
}

void vmmx__trace_close(struct vmmx_ctx *ctx)
{
	if (ctx->trace_fd >= 0)
		close(ctx->trace_fd);
	ctx->trace_fd = -1;
}

void vmmx__trace_place(struct vmmx_ctx *ctx, const struct vmmx__trace_rec *rec)
{
	char line[1536], pref[32], chosen[32], tried[700], spec[300];
	struct timespec ts;
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	vmmx__json_escape(tried, sizeof(tried), rec->tried);
	vmmx__json_escape(spec, sizeof(spec), rec->buf->policy->spec);
	n = snprintf(line, sizeof(line),
		     "{\"time\":%lld.%06ld,\"pid\":%d,\"buf\":\"%p\",\"buf_id\":%llu,\"policy\":\"%s\","
		     "\"chunk\":%zu,\"offset\":%zu,\"size\":%zu,\"preferred\":\"%s\",\"chosen\":\"%s\","
		     "\"fallback\":%s,\"reason\":\"%s\",\"cache_hit\":%s,\"refused\":\"%s\"}\n",
		     (long long)ts.tv_sec, ts.tv_nsec / 1000, (int)getpid(), (void *)rec->buf->base,
		     (unsigned long long)rec->buf->id, spec, rec->chunk, rec->off, rec->size,
		     vmmx_loc_name(rec->preferred, pref, sizeof(pref)),
		     vmmx_loc_name(rec->chosen, chosen, sizeof(chosen)),
		     rec->why != VMMX__WHY_OK ? "true" : "false", vmmx__why_name(rec->why),
		     rec->cache_hit ? "true" : "false", tried);
	if (n > 0 && (size_t)n < sizeof(line) && write(ctx->trace_fd, line, (size_t)n) < 0)
		return; /* dropped on purpose: see the top of the file */
}
