// SPDX-License-Identifier: MIT
/*
 * json.c - the strict JSON parser of the tests (see json.h): recursive
 * descent over the RFC 8259 grammar, nesting bounded so that hostile input
 * cannot exhaust the stack.  The UTF-8 it writes for \u escapes is the
 * writer's (lib/json.c), so reader and writer agree on the encoding.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h"
#include "tests/tap/json.h"

/* Deeper than anything libvmmx writes; bounds the recursion. */
#define JSON_MAX_DEPTH 64

struct json {
	enum json_type type;
	int b;                  /* JSON_BOOL */
	double num;             /* JSON_NUM */
	char *s;                /* JSON_STR: the text; JSON_NUM: the number as written */
	size_t n;               /* JSON_ARR, JSON_OBJ: entries */
	struct json **items;
	char **keys;            /* JSON_OBJ */
};

struct parser {
	const char *start, *p;
	char err[160];
};

static __thread char json_err[160];

static struct json *fail(struct parser *ps, const char *what)
{
	if (!ps->err[0])
		snprintf(ps->err, sizeof(ps->err), "offset %zu: %s", (size_t)(ps->p - ps->start),
			 what);
	return NULL;
}

static void skip_ws(struct parser *ps)
{
	while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
		ps->p++;
}

static struct json *node(struct parser *ps, enum json_type type)
{
	struct json *j = calloc(1, sizeof(*j));

	if (!j)
		return fail(ps, "out of memory");
	j->type = type;
	return j;
}

static int hex4(const char *p, unsigned int *out)
{
	unsigned int v = 0;

	for (int i = 0; i < 4; i++) {
		char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned int)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned int)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned int)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* A string literal at ps->p (on the opening quote); returns malloc'd UTF-8. */
static char *parse_string_text(struct parser *ps)
{
	const char *p = ps->p + 1;
	size_t cap = 16, len = 0;
	char *out = malloc(cap);

	if (!out) {
		fail(ps, "out of memory");
		return NULL;
	}
	for (;;) {
		unsigned char c = (unsigned char)*p;

		/* Room for the longest thing one step appends (4 bytes) and the NUL. */
		if (len + 5 > cap) {
			char *bigger = realloc(out, cap * 2);

			if (!bigger) {
				free(out);
				fail(ps, "out of memory");
				return NULL;
			}
			out = bigger;
			cap *= 2;
		}
		if (c == '"') {
			p++;
			break;
		}
		if (c == '\0') {
			ps->p = p;
			free(out);
			fail(ps, "unterminated string");
			return NULL;
		}
		if (c < 0x20) {
			ps->p = p;
			free(out);
			fail(ps, "control character in a string (must be escaped)");
			return NULL;
		}
		if (c != '\\') {
			out[len++] = (char)c;
			p++;
			continue;
		}
		p++;
		switch (*p) {
		case '"': out[len++] = '"'; p++; break;
		case '\\': out[len++] = '\\'; p++; break;
		case '/': out[len++] = '/'; p++; break;
		case 'b': out[len++] = '\b'; p++; break;
		case 'f': out[len++] = '\f'; p++; break;
		case 'n': out[len++] = '\n'; p++; break;
		case 'r': out[len++] = '\r'; p++; break;
		case 't': out[len++] = '\t'; p++; break;
		case 'u': {
			unsigned int cp, lo;

			if (hex4(p + 1, &cp)) {
				ps->p = p;
				free(out);
				fail(ps, "\\u needs 4 hex digits");
				return NULL;
			}
			p += 5;
			if (cp >= 0xdc00 && cp <= 0xdfff) {
				ps->p = p;
				free(out);
				fail(ps, "lone low surrogate");
				return NULL;
			}
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &lo) ||
				    lo < 0xdc00 || lo > 0xdfff) {
					ps->p = p;
					free(out);
					fail(ps, "high surrogate without a low surrogate");
					return NULL;
				}
				p += 6;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			if (cp == 0) {
				ps->p = p;
				free(out);
				fail(ps, "\\u0000 is not supported (NUL-terminated strings)");
				return NULL;
			}
			len += vmmx__json_utf8_put(out + len, cp);
			break;
		}
		default:
			ps->p = p;
			free(out);
			fail(ps, "unknown escape");
			return NULL;
		}
	}
	out[len] = '\0';
	ps->p = p;
	return out;
}

static struct json *parse_value(struct parser *ps, int depth);

static struct json *parse_number(struct parser *ps)
{
	const char *p = ps->p, *begin = p;
	struct json *j;

	if (*p == '-')
		p++;
	if (*p == '0') {
		p++;
		if (*p >= '0' && *p <= '9') {
			ps->p = p;
			return fail(ps, "leading zero in a number");
		}
	} else if (*p >= '1' && *p <= '9') {
		while (*p >= '0' && *p <= '9')
			p++;
	} else {
		ps->p = p;
		return fail(ps, "expected a digit");
	}
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9') {
			ps->p = p;
			return fail(ps, "expected a digit after '.'");
		}
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (*p < '0' || *p > '9') {
			ps->p = p;
			return fail(ps, "expected a digit in the exponent");
		}
		while (*p >= '0' && *p <= '9')
			p++;
	}
	j = node(ps, JSON_NUM);
	if (!j)
		return NULL;
	j->s = strndup(begin, (size_t)(p - begin));
	if (!j->s) {
		free(j);
		return fail(ps, "out of memory");
	}
	j->num = strtod(j->s, NULL);
	ps->p = p;
	return j;
}

static int append(struct parser *ps, struct json *c, struct json *item, char *key)
{
	struct json **items = realloc(c->items, (c->n + 1) * sizeof(*items));
	char **keys;

	if (!items)
		goto err;
	c->items = items;
	if (c->type == JSON_OBJ) {
		keys = realloc(c->keys, (c->n + 1) * sizeof(*keys));
		if (!keys)
			goto err;
		c->keys = keys;
		c->keys[c->n] = key;
	}
	c->items[c->n++] = item;
	return 0;
err:
	fail(ps, "out of memory");
	json_free(item);
	free(key);
	return -1;
}

static struct json *parse_container(struct parser *ps, int depth, bool obj)
{
	struct json *c = node(ps, obj ? JSON_OBJ : JSON_ARR);
	char close = obj ? '}' : ']';

	if (!c)
		return NULL;
	ps->p++;
	skip_ws(ps);
	if (*ps->p == close) {
		ps->p++;
		return c;
	}
	for (;;) {
		char *key = NULL;
		struct json *item;

		skip_ws(ps);
		if (obj) {
			if (*ps->p != '"') {
				fail(ps, "expected a string key");
				goto err;
			}
			key = parse_string_text(ps);
			if (!key)
				goto err;
			skip_ws(ps);
			if (*ps->p != ':') {
				free(key);
				fail(ps, "expected ':' after a key");
				goto err;
			}
			ps->p++;
		}
		item = parse_value(ps, depth + 1);
		if (!item) {
			free(key);
			goto err;
		}
		if (append(ps, c, item, key))
			goto err;
		skip_ws(ps);
		if (*ps->p == ',') {
			ps->p++;
			continue;
		}
		if (*ps->p == close) {
			ps->p++;
			return c;
		}
		fail(ps, obj ? "expected ',' or '}'" : "expected ',' or ']'");
		goto err;
	}
err:
	json_free(c);
	return NULL;
}

static struct json *parse_value(struct parser *ps, int depth)
{
	struct json *j;

	if (depth > JSON_MAX_DEPTH)
		return fail(ps, "nested too deep");
	skip_ws(ps);
	switch (*ps->p) {
	case '{':
		return parse_container(ps, depth, true);
	case '[':
		return parse_container(ps, depth, false);
	case '"': {
		char *s = parse_string_text(ps);

		if (!s)
			return NULL;
		j = node(ps, JSON_STR);
		if (!j) {
			free(s);
			return NULL;
		}
		j->s = s;
		return j;
	}
	case 't':
	case 'f':
	case 'n': {
		static const struct {
			const char *word;
			enum json_type type;
			int b;
		} words[] = {
			{ "true", JSON_BOOL, 1 },
			{ "false", JSON_BOOL, 0 },
			{ "null", JSON_NULL, 0 },
		};

		for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
			size_t len = strlen(words[i].word);

			if (strncmp(ps->p, words[i].word, len))
				continue;
			j = node(ps, words[i].type);
			if (!j)
				return NULL;
			j->b = words[i].b;
			ps->p += len;
			return j;
		}
		return fail(ps, "expected a value");
	}
	default:
		if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))
			return parse_number(ps);
		return fail(ps, *ps->p ? "expected a value" : "unexpected end of text");
	}
}

struct json *json_parse(const char *text, const char **err)
{
	struct parser ps = { .start = text, .p = text };
	struct json *j;

	if (!text) {
		snprintf(json_err, sizeof(json_err), "no text");
		if (err)
			*err = json_err;
		return NULL;
	}
	j = parse_value(&ps, 0);
	if (j) {
		skip_ws(&ps);
		if (*ps.p) {
			fail(&ps, "text after the value");
			json_free(j);
			j = NULL;
		}
	}
	if (!j) {
		snprintf(json_err, sizeof(json_err), "%s", ps.err);
		if (err)
			*err = json_err;
	}
	return j;
}

void json_free(struct json *j)
{
	if (!j)
		return;
	for (size_t i = 0; i < j->n; i++) {
		json_free(j->items[i]);
		if (j->keys)
			free(j->keys[i]);
	}
	free(j->items);
	free(j->keys);
	free(j->s);
	free(j);
}

enum json_type json_type(const struct json *j)
{
	return j ? j->type : JSON_NULL;
}

const struct json *json_get(const struct json *obj, const char *key)
{
	const struct json *found = NULL;

	if (!obj || obj->type != JSON_OBJ || !key)
		return NULL;
	for (size_t i = 0; i < obj->n; i++)
		if (!strcmp(obj->keys[i], key))
			found = obj->items[i];
	return found;
}

const struct json *json_index(const struct json *arr, size_t i)
{
	if (!arr || (arr->type != JSON_ARR && arr->type != JSON_OBJ) || i >= arr->n)
		return NULL;
	return arr->items[i];
}

const char *json_key(const struct json *obj, size_t i)
{
	if (!obj || obj->type != JSON_OBJ || i >= obj->n)
		return NULL;
	return obj->keys[i];
}

size_t json_len(const struct json *j)
{
	return j && (j->type == JSON_ARR || j->type == JSON_OBJ) ? j->n : 0;
}

double json_num(const struct json *j)
{
	return j && j->type == JSON_NUM ? j->num : NAN;
}

uint64_t json_u64(const struct json *j)
{
	uint64_t v = 0;

	if (!j || j->type != JSON_NUM || j->s[0] == '-')
		return UINT64_MAX;
	for (const char *p = j->s; *p; p++) {
		if (*p < '0' || *p > '9' || v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return UINT64_MAX;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	return v;
}

const char *json_str(const struct json *j)
{
	return j && j->type == JSON_STR ? j->s : NULL;
}

int json_bool(const struct json *j)
{
	return j && j->type == JSON_BOOL ? j->b : -1;
}

bool json_is_null(const struct json *j)
{
	return j && j->type == JSON_NULL;
}
