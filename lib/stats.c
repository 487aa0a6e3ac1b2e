// SPDX-License-Identifier: MIT
/*
 * stats.c - statistics: counters kept by the other files, plus what the
 * chunk tables say now (read lock-free, one buffer at a time), as a struct
 * and as JSON.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal/addr.h"

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

static void collect(struct vmmx_ctx *ctx, struct vmmx_stats *out)
{
	struct vmmx__buflist *l;
	struct vmm_counts vc;

	memset(out, 0, sizeof(*out));
	out->version = VMMX_STATS_VERSION;
	urcu_bp_read_lock();
	l = rcu_dereference(ctx->bufs);
	out->buffers = (unsigned int)l->n;
	for (size_t i = 0; i < l->n; i++) {
		const struct vmmx__table *t = rcu_dereference(l->bufs[i]->table);

		out->reserved_bytes += l->bufs[i]->capacity;
		out->slack_bytes += t->mapped - t->size;
		for (size_t j = 0; j < t->n; j++) {
			if (vmm_loc_is_host(t->c[j].loc)) {
				out->host_bytes += t->c[j].size;
				out->host_chunks++;
			} else {
				int d = t->c[j].loc.id;

				out->device_bytes += t->c[j].size;
				out->device_chunks++;
				if (d >= 0 && d < VMMX_STATS_DEVICES) {
					out->dev_bytes[d] += t->c[j].size;
					out->dev_chunks[d]++;
				}
			}
		}
	}
	urcu_bp_read_unlock();

	out->device_count = ctx->ndev;
	for (int k = 0; k < VMMX__MAX_DEVICES; k++) {
		out->placed_device += LOAD(ctx->ctr.placed[k]);
		if (k < VMMX_STATS_DEVICES) {
			out->dev_placed[k] = LOAD(ctx->ctr.placed[k]);
			out->dev_held[k] = LOAD(ctx->held[k]);
		}
	}
	out->placed_host = LOAD(ctx->ctr.placed[VMMX__HOST_SLOT]);
	out->fallbacks_limit = LOAD(ctx->ctr.fallbacks[VMMX__WHY_LIMIT]);
	out->fallbacks_headroom = LOAD(ctx->ctr.fallbacks[VMMX__WHY_HEADROOM]);
	out->fallbacks_oom = LOAD(ctx->ctr.fallbacks[VMMX__WHY_OOM]);
	out->fallbacks = out->fallbacks_limit + out->fallbacks_headroom + out->fallbacks_oom;
	out->resizes = LOAD(ctx->ctr.resizes);
	out->resize_failures = LOAD(ctx->ctr.resize_failures);
	out->copies = LOAD(ctx->ctr.copies);
	out->deferred = LOAD(ctx->ndeferred);
	out->cache_hits = LOAD(ctx->ctr.cache_hits);
	out->cache_misses = LOAD(ctx->ctr.cache_misses);
	out->cache_bytes = LOAD(ctx->cache_total);
	out->cache_released = LOAD(ctx->ctr.cache_released);
	out->migrations = LOAD(ctx->ctr.migrations);
	out->migrated_bytes = LOAD(ctx->ctr.migrated_bytes);
	out->evictions = LOAD(ctx->ctr.evictions);
	out->promotions = LOAD(ctx->ctr.promotions);
	out->shadow_bytes = LOAD(ctx->shadow_bytes);
	out->copies_saved = LOAD(ctx->ctr.copies_saved);
	out->copy_bytes_saved = LOAD(ctx->ctr.copy_bytes_saved);
	out->moves_busy = LOAD(ctx->ctr.moves_busy);
	out->checksums = LOAD(ctx->ctr.checksums);
	out->verified_saved = LOAD(ctx->ctr.verified_saved);
	out->verified_changed = LOAD(ctx->ctr.verified_changed);
	out->parked_bytes = LOAD(ctx->parked_bytes);
	out->parks = LOAD(ctx->ctr.parks);
	out->unparks = LOAD(ctx->ctr.unparks);
	out->registrations = LOAD(ctx->reg_count);
	out->registered_bytes = LOAD(ctx->reg_bytes);
	out->host_access = (enum vmmx_host_access)ctx->host_access;
	vmm_counts(ctx->vmm, &vc);
	memcpy(out->driver_calls, vc.calls, sizeof(out->driver_calls));
	memcpy(out->driver_ns, vc.ns, sizeof(out->driver_ns));
	out->checksum_ns = vc.ns[VMM_OP_CHECKSUM];
	out->event_calls = vc.event_calls;
	out->event_ns = vc.ns[VMM_OP_EVENT];
	out->checksum_calls = vc.checksum_calls;
}

VMMX_API const char *vmmx_op_name(enum vmmx_op op)
{
	return (unsigned int)op < VMMX_OP_COUNT ? vmm_op_name(op) : NULL;
}

VMMX_API int vmmx_stats_get(struct vmmx_ctx *ctx, struct vmmx_stats *st)
{
	struct vmmx_stats out;
	size_t n;

	vmmx__clear_last_error();
	if (!ctx || !st || st->size < offsetof(struct vmmx_stats, buffers))
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL,
				  "vmmx_stats_get: NULL argument or st->size not set");
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_stats_get");
	collect(ctx, &out);
	n = st->size < sizeof(out) ? st->size : sizeof(out);
	out.size = st->size;
	memcpy(st, &out, n);
	return 0;
}

/* An appender that counts what it could not write, like snprintf. */
struct out {
	char *buf;
	size_t len, pos;
};

static void put(struct out *o, const char *fmt, ...) VMMX__FMT(2, 3);

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->buf + (o->pos < o->len ? o->pos : o->len),
		      o->pos < o->len ? o->len - o->pos : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->pos += (size_t)n;
}

static void put_limit(struct out *o, uint64_t v)
{
	if (v == UINT64_MAX)
		put(o, "null");
	else
		put(o, "%llu", (unsigned long long)v);
}

/* "@key":{"reserve":N,...}, one member per enum vmmx_op, and a comma. */
static void put_ops(struct out *o, const char *key, const uint64_t v[VMMX_OP_COUNT])
{
	put(o, "\"%s\":{", key);
	for (int i = 0; i < VMMX_OP_COUNT; i++)
		put(o, "%s\"%s\":%llu", i ? "," : "", vmm_op_name((enum vmmx_op)i),
		    (unsigned long long)v[i]);
	put(o, "},");
}

VMMX_API int vmmx_stats_json(struct vmmx_ctx *ctx, char *buf, size_t len, size_t *len_p)
{
	struct out o = { buf, len, 0 };
	struct vmmx_stats st;
	struct vmmx__policy *pol;
	const char *sep = "";

	vmmx__clear_last_error();
	if (!ctx || (!buf && len))
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_stats_json: NULL argument");
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_stats_json");
	collect(ctx, &st);
	put(&o, "{\"version\":%u,\"buffers\":%u,\"reserved_bytes\":%llu,", st.version, st.buffers,
	    (unsigned long long)st.reserved_bytes);
#define U(f) put(&o, "\"" #f "\":%llu,", (unsigned long long)st.f)
	U(device_bytes); U(host_bytes); U(device_chunks); U(host_chunks);
	U(placed_device); U(placed_host); U(fallbacks); U(fallbacks_limit);
	U(fallbacks_headroom); U(fallbacks_oom); U(resizes); U(resize_failures);
	U(deferred); U(copies); U(cache_hits); U(cache_misses); U(cache_bytes);
	U(cache_released); U(registrations); U(registered_bytes);
	U(migrations); U(migrated_bytes); U(evictions); U(promotions);
	U(shadow_bytes); U(copies_saved); U(copy_bytes_saved); U(slack_bytes); U(moves_busy);
	U(checksums); U(verified_saved); U(verified_changed);
	U(parked_bytes); U(parks); U(unparks); U(checksum_ns); U(event_calls); U(event_ns);
	U(checksum_calls);
#undef U
	put(&o, "\"host_access\":\"%s\",", vmmx__host_access_name(ctx->host_access));
	put_ops(&o, "driver_calls", st.driver_calls);
	put_ops(&o, "driver_ns", st.driver_ns);
	put(&o, "\"locations\":[");
	for (int k = 0; k < VMMX__NSLOTS; k++) {
		char name[32];
		struct vmmx_loc loc = k == VMMX__HOST_SLOT ? (struct vmmx_loc){ VMMX_LOC_HOST, 0 }
							   : (struct vmmx_loc){ VMMX_LOC_DEVICE, k };

		if (k < VMMX__HOST_SLOT && k >= ctx->ndev)
			continue;
		put(&o, "%s{\"location\":\"%s\",\"held\":%llu,\"cached\":%llu,\"total\":%llu,\"limit\":",
		    sep, vmmx_loc_name(loc, name, sizeof(name)),
		    (unsigned long long)LOAD(ctx->held[k]), (unsigned long long)LOAD(ctx->cache_bytes[k]),
		    (unsigned long long)ctx->total[k]);
		put_limit(&o, ctx->limit[k]);
		put(&o, ",\"headroom\":%llu}", (unsigned long long)ctx->headroom[k]);
		sep = ",";
	}
	put(&o, "],\"policies\":[");
	sep = "";
	urcu_bp_read_lock();
	for (pol = rcu_dereference(ctx->policies); pol; pol = rcu_dereference(pol->next)) {
		const char *csep = "";

		char esc[2 * VMMX__POLICY_SPEC_MAX + 8 * sizeof(pol->where)];

		vmmx__json_escape(esc, sizeof(esc), pol->spec);
		put(&o, "%s{\"spec\":\"%s\"", sep, esc);
		vmmx__json_escape(esc, sizeof(esc), pol->where);
		put(&o, ",\"source\":\"%s\",\"counters\":{", esc);
		for (int i = 0; i < VMMX__POLICY_COUNTERS; i++) {
			const struct vmmx__policy_counter *c = &pol->counters[i];
			uint64_t sum = 0;
			bool dup = false;

			if (!__atomic_load_n(&c->name_set, __ATOMIC_ACQUIRE))
				continue;
			/* Two threads may have claimed slots for one new name: one key, summed. */
			for (int j = 0; j < VMMX__POLICY_COUNTERS; j++) {
				const struct vmmx__policy_counter *d = &pol->counters[j];

				if (!__atomic_load_n(&d->name_set, __ATOMIC_ACQUIRE) || strcmp(d->name, c->name))
					continue;
				if (j < i)
					dup = true;
				sum += LOAD(d->value);
			}
			if (dup)
				continue;
			vmmx__json_escape(esc, sizeof(esc), c->name);
			put(&o, "%s\"%s\":%llu", csep, esc, (unsigned long long)sum);
			csep = ",";
		}
		put(&o, "}}");
		sep = ",";
	}
	urcu_bp_read_unlock();
	put(&o, "]}");
	if (len_p)
		*len_p = o.pos + 1;
	if (o.pos >= len)
		return vmmx__fail(&ctx->conf.log, -VMMX_ERANGE,
				  "vmmx_stats_json: %zu bytes needed, %zu given", o.pos + 1, len);
	return 0;
}
