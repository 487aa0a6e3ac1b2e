/* SPDX-License-Identifier: MIT */
/*
 * ctx.h - opening a libvmmx context the tools' way: each error printed once.
 *
 * The library shows a configuration mistake (a bad VMMX_* variable) on its
 * log at warn level, because a program that merely links libvmmx has no
 * other way to learn of it; vmmx_ctx_create() then fails with the same
 * text in vmmx_last_error(), which a tool prints under its own name.  To
 * print it once, the tools give the context a log sink of their own
 * (tool_log) that writes what the default sink writes ("libvmmx: LEVEL:
 * MSG" on stderr), except while tool_ctx_create() runs: then it holds the
 * messages back, and after a failure drops the one the tool is about to
 * print as its error.  Not thread-safe: the tools open contexts from one
 * thread (the sink itself may then be called from any thread).
 */
#ifndef TOOLS_CTX_H
#define TOOLS_CTX_H

#include "vmmx.h"

/**
 * tool_ctx_create() - vmmx_ctx_create(@cfg, @ctx_p) (NULL @cfg: the
 * defaults), with tool_log as the log sink unless @cfg names one.
 * Return: vmmx_ctx_create()'s; on an error the library's own log line of
 * that error (vmmx_last_error()) is not printed: the caller prints it.
 */
int tool_ctx_create(struct vmmx_config *cfg, struct vmmx_ctx **ctx_p);

/**
 * tool_ctx_error() - say on stderr that vmmx_ctx_create() failed with @err
 * and, unless VMMX_BACKEND is already sim, that VMMX_BACKEND=sim runs the
 * same flow without a GPU.
 */
void tool_ctx_error(const char *prog, int err);

/** tool_log() - the tools' log sink (a vmmx_log_fn): see above. */
void tool_log(void *arg, enum vmmx_log_level level, const char *msg);

#endif /* TOOLS_CTX_H */
