/* SPDX-License-Identifier: MIT */
/*
 * Every string the tool writes that it did not make itself (a file's
 * name, a lease key or owner from a file, a member's name or host from
 * etcd, a user name) may hold anything its author chose: ESC and the
 * other C0 controls, the C1 controls (U+009B is a one-character CSI),
 * DEL, bytes that are not UTF-8. Written raw, they set a terminal's
 * title, clear its screen, rewrite a line already printed. Two writers,
 * one reading of UTF-8:
 *
 * tool_esc, for every human line: printable ASCII and well-formed UTF-8
 * as they are; a backslash doubled; each C0 byte, DEL and each byte of a
 * malformed sequence as \xNN; the C1 controls, the line and paragraph
 * separators and the bidirectional overrides and isolates (which reorder
 * what a terminal shows) as \uNNNN. Distinct inputs stay distinct.
 *
 * json_str, for --json: quotes, backslashes and what tool_esc escapes (C0,
 * DEL, C1, the separators and bidirectional controls) as JSON escapes,
 * other well-formed UTF-8 as itself, each byte of a malformed sequence as
 * \u00XX, so the document always parses and never acts on a terminal.
 *
 * tool_label_value, for a Prometheus label value: tool_esc's text (always
 * valid UTF-8, which the exposition format requires of a label value, and
 * distinct for distinct names), with the format's own escapes of '\\'
 * and '"' on top.
 */
#include "vigil.h"

#include <string.h>

/* Length of the well-formed UTF-8 sequence at s (at most n bytes), or 0,
 * with its code point in *cp: no overlong forms, no surrogates, nothing
 * past U+10FFFF (RFC 3629). */
static size_t utf8_len(const unsigned char *s, size_t n, uint32_t *cpp)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80) {
        *cpp = c;
        return 1;
    }
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
    *cpp = cp;
    return len;
}

/* Code points a terminal acts on or reorders by, beyond the C0 range. */
static bool acts(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) ||
           (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200e || cp == 0x200f || cp == 0x061c;
}

/* The escaped form of the character at s (n > 0 bytes left) into piece:
 * its length; *used the bytes of s it stands for. */
static size_t esc_piece(const unsigned char *s, size_t n, bool quoted, char piece[16], size_t *used)
{
    unsigned char c = s[0];
    uint32_t cp = 0;
    size_t len = utf8_len(s, n, &cp);
    *used = len ? len : 1;
    if (c == '\\' || (quoted && c == '"')) {
        piece[0] = '\\', piece[1] = (char)c;
        return 2;
    }
    if (len == 0 || c < 0x20 || c == 0x7f)
        return (size_t)snprintf(piece, 16, "\\x%02x", c);
    if (acts(cp))
        return (size_t)snprintf(piece, 16, "\\u%04x", (unsigned)cp);
    memcpy(piece, s, len);
    return len;
}

size_t tool_esc_buf(char *dst, size_t cap, const char *str, size_t maxlen, bool quoted)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = 0, out = 0;
    while (n < maxlen && s[n])
        n++;
    for (size_t i = 0; i < n;) {
        char piece[16];
        size_t used, plen = esc_piece(s + i, n - i, quoted, piece, &used);
        if (dst) {
            if (out + plen >= cap)
                break; /* what fits, never half a piece */
            memcpy(dst + out, piece, plen);
        }
        out += plen;
        i += used;
    }
    if (dst && cap)
        dst[out] = '\0';
    return out;
}

void tool_esc(FILE *out, const char *str, size_t maxlen)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = 0;
    while (n < maxlen && s[n])
        n++;
    for (size_t i = 0; i < n;) {
        char piece[16];
        size_t used, plen = esc_piece(s + i, n - i, false, piece, &used);
        fwrite(piece, 1, plen, out);
        i += used;
    }
}

const char *tool_e(const char *s)
{
    /* A few at a time in one printf, each thread its own. */
    static _Thread_local char bufs[4][4096];
    static _Thread_local unsigned next;
    char *b = bufs[next++ % 4];
    if (!s)
        return "(null)";
    if (tool_esc_buf(NULL, 0, s, SIZE_MAX, false) < sizeof(bufs[0]))
        tool_esc_buf(b, sizeof(bufs[0]), s, SIZE_MAX, false);
    else
        strcat(b + tool_esc_buf(b, sizeof(bufs[0]) - 3, s, SIZE_MAX, false), "...");
    return b;
}

void tool_label_value(FILE *out, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str);
    for (size_t i = 0; i < n;) {
        char piece[16];
        size_t used, plen = esc_piece(s + i, n - i, false, piece, &used);
        for (size_t k = 0; k < plen; k++) {
            if (piece[k] == '\\' || piece[k] == '"')
                fputc('\\', out);
            fputc(piece[k], out);
        }
        i += used;
    }
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
        uint32_t cp;
        size_t len = utf8_len(s + i, n - i, &cp);
        if (len == 0 || c < 0x20 || c == 0x7f || acts(cp)) {
            /* A control (C0, DEL, C1, a separator or bidirectional one),
             * or a byte that is not UTF-8 (as U+00XX). */
            fprintf(out, "\\u%04x", len == 0 ? c : (unsigned)cp);
            i += len ? len : 1;
            continue;
        }
        fwrite(s + i, 1, len, out);
        i += len;
    }
    fputc('"', out);
}
