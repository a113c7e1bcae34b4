/* SPDX-License-Identifier: MIT */
/*
 * JSON output. Strings from a vigil file (lease keys and owners) may hold
 * anything a peer wrote, so every string is escaped: quotes, backslashes
 * and control characters as JSON escapes, well-formed UTF-8 as itself, and
 * each byte of a malformed sequence as \u00XX, so the document always
 * parses. Counters are numbers while a double holds them exactly.
 */
#include "vigil.h"

#include <inttypes.h>

/* Length of the well-formed UTF-8 sequence at s (at most n bytes), or 0:
 * no overlong forms, no surrogates, nothing past U+10FFFF (RFC 3629). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, cp = c & 0x1f, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, cp = c & 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, cp = c & 0x07, min = 0x10000;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

void json_str(FILE *out, const char *str, size_t maxlen)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = 0;
    while (n < maxlen && s[n])
        n++;
    fputc('"', out);
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        switch (c) {
        case '"':  fputs("\\\"", out); i++; continue;
        case '\\': fputs("\\\\", out); i++; continue;
        case '\b': fputs("\\b", out); i++; continue;
        case '\f': fputs("\\f", out); i++; continue;
        case '\n': fputs("\\n", out); i++; continue;
        case '\r': fputs("\\r", out); i++; continue;
        case '\t': fputs("\\t", out); i++; continue;
        }
        if (c < 0x20 || c == 0x7f) {
            fprintf(out, "\\u%04x", c);
            i++;
            continue;
        }
        size_t len = utf8_len(s + i, n - i);
        if (len == 0) {
            fprintf(out, "\\u%04x", c); /* a byte that is not UTF-8 */
            i++;
            continue;
        }
        fwrite(s + i, 1, len, out);
        i += len;
    }
    fputc('"', out);
}

void json_u64(FILE *out, uint64_t v)
{
    if (v <= (UINT64_C(1) << 53))
        fprintf(out, "%" PRIu64, v);
    else
        fprintf(out, "\"%" PRIu64 "\"", v);
}

void json_hex(FILE *out, uint64_t v)
{
    fprintf(out, "\"0x%" PRIx64 "\"", v);
}
