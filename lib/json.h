/* SPDX-License-Identifier: MIT */
/*
 * json.h - the project's one JSON writer: how a string becomes a JSON
 * string, and the UTF-8 both directions need.  A primitive with no
 * dependency on the rest of lib/: built as the noinst libvmmx_json.la,
 * which libvmmx (the log, the stats, the trace), the tools (tools/report.c)
 * and the tests (tests/tap/json.c, the reader) all link.  Hidden: nothing
 * here leaves libvmmx.so.
 *
 * The one escaping rule: '"' and '\\' get a backslash; control bytes
 * (below 0x20, and 0x7f) become \u00XX; well-formed UTF-8 (RFC 3629: no
 * overlong forms, no surrogates, nothing past U+10FFFF) passes through;
 * every byte of anything else becomes \u00XX too (the byte read as
 * Latin-1), so that the output is valid JSON and valid UTF-8 whatever bytes
 * a policy argument or a file name holds, and the bytes can be recovered.
 *
 * Context: pure functions of their arguments; any thread.
 */
#ifndef VMMX_LIB_JSON_H
#define VMMX_LIB_JSON_H

#include <stddef.h>
#include <stdio.h>

/*
 * vmmx__json_utf8_len() - the length (1 to 4) of the well-formed UTF-8
 * sequence at @s, or 0 when the bytes there are none.  Reads no further
 * than the first byte that fails, so never past @s's NUL.
 */
size_t vmmx__json_utf8_len(const char *s);

/*
 * vmmx__json_utf8_put() - write code point @cp (at most U+10FFFF, not a
 * surrogate) as UTF-8 at @out, which has room for 4 bytes; no NUL.
 * Return: the bytes written, 1 to 4.
 */
size_t vmmx__json_utf8_put(char *out, unsigned int cp);

/*
 * vmmx__json_escape() - @s escaped for the inside of a JSON string (no
 * quotes) into @out of @len bytes, NUL-terminated; truncated where it does
 * not fit, never in the middle of a UTF-8 sequence or an escape.  A @len
 * of 0 writes nothing.
 */
void vmmx__json_escape(char *out, size_t len, const char *s);

/*
 * vmmx__json_put_str() - @s as a JSON string literal, quotes included, to
 * @f (NULL @s: the empty string).  Errors are @f's (ferror()).
 */
void vmmx__json_put_str(FILE *f, const char *s);

#endif /* VMMX_LIB_JSON_H */
