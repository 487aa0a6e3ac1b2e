/* SPDX-License-Identifier: MIT */
/*
 * json.h - a small strict JSON parser for the tests (RFC 8259): objects,
 * arrays, strings with every escape (\uXXXX and surrogate pairs become
 * UTF-8), numbers, true, false and null, parsed into a tree.  Anything
 * outside the grammar (trailing commas, leading zeros, control bytes in
 * strings, bare words, text after the value) is an error, so that a test
 * can say "this output is JSON" and mean it.
 *
 * Lookups accept NULL and wrong types and answer "nothing" (NULL, 0, NaN,
 * -1), so chains like json_num(json_get(json_index(a, 2), "size")) need no
 * checks in between.
 *
 * Not thread-safe only in one way: the error text of json_parse() lives in
 * thread-local storage until the thread's next json_parse().
 */
#ifndef TAP_JSON_H
#define TAP_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum json_type {
	JSON_NULL,
	JSON_BOOL,
	JSON_NUM,
	JSON_STR,
	JSON_ARR,
	JSON_OBJ,
};

struct json;

/*
 * Parse @text, which must hold exactly one JSON value (white space around it
 * allowed).  Returns the tree, or NULL with *@err (if @err is not NULL) set
 * to a message giving the byte offset and what was expected there.
 */
struct json *json_parse(const char *text, const char **err);
/* Free a tree from json_parse(); NULL is a no-op. */
void json_free(struct json *j);

/* The type of a value; JSON_NULL for a NULL pointer too. */
enum json_type json_type(const struct json *j);
/* Member @key of an object (the last one if repeated); NULL if none or not an object. */
const struct json *json_get(const struct json *obj, const char *key);
/* Element @i of an array, or member @i of an object; NULL when out of range. */
const struct json *json_index(const struct json *arr, size_t i);
/* Key of member @i of an object; NULL when out of range or not an object. */
const char *json_key(const struct json *obj, size_t i);
/* Elements of an array or members of an object; 0 for anything else. */
size_t json_len(const struct json *j);
/* A number's value; NaN when @j is not a number. */
double json_num(const struct json *j);
/*
 * A number's value as an exact unsigned 64-bit integer (byte counts above
 * 2^53 lose precision in a double); UINT64_MAX when @j is not a number
 * written as a non-negative integer that fits.
 */
uint64_t json_u64(const struct json *j);
/* A string's text (NUL-terminated UTF-8); NULL when @j is not a string. */
const char *json_str(const struct json *j);
/* 1 for true, 0 for false, -1 when @j is not a boolean. */
int json_bool(const struct json *j);
/* Whether @j is a JSON null (false for a NULL pointer: "absent" is not "null"). */
bool json_is_null(const struct json *j);

#endif
