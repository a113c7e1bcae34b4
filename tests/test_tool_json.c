/* SPDX-License-Identifier: MIT */
/*
 * Description: the tool's JSON writers (tools/json.c, compiled in here):
 * every string a hostile file could hold comes out as a string a strict
 * JSON reader accepts and decodes to the same text (quotes, backslashes,
 * control characters, DEL, valid UTF-8 kept, each byte of malformed UTF-8
 * as \u00XX), a field without a NUL stops at its size, and counters are
 * numbers up to 2^53 and strings past it.
 */
#include "tooltest.h"

#include "../tools/escape.c"
#include "../tools/json.c"

static char *render_str(const char *s, size_t maxlen)
{
    static char buf[4096];
    FILE *fp = fmemopen(buf, sizeof(buf), "w");
    json_str(fp, s, maxlen);
    fclose(fp);
    return buf;
}

/* Writes s, parses it back, and expects the decoded text `want` (wlen). */
static int roundtrip(const char *s, size_t maxlen, const char *want, size_t wlen)
{
    char *text = render_str(s, maxlen);
    struct vj *v = vj_parse(text);
    EXPECT(v && v->type == VJ_STR, "json_str gave '%s', not a JSON string (%s)", text,
           vj_error ? vj_error : "not a string");
    EXPECT(v->len == wlen && memcmp(v->str, want, wlen) == 0,
           "json_str gave '%s', which decodes to %zu bytes, expected %zu", text, v->len, wlen);
    return 0;
}

static int test_plain_and_escapes(void)
{
    if (roundtrip("", 10, "", 0) || roundtrip("lease/a", 128, "lease/a", 7))
        return 1;
    EXPECT(strcmp(render_str("a\"b\\c", 16), "\"a\\\"b\\\\c\"") == 0, "quotes and backslashes: %s",
           render_str("a\"b\\c", 16));
    EXPECT(strcmp(render_str("\n\t\r\b\f", 16), "\"\\n\\t\\r\\b\\f\"") == 0, "short escapes: %s",
           render_str("\n\t\r\b\f", 16));
    EXPECT(strcmp(render_str("\x01\x1f\x7f", 16), "\"\\u0001\\u001f\\u007f\"") == 0,
           "control bytes and DEL: %s", render_str("\x01\x1f\x7f", 16));
    static const char ctl[] = "\"\\/\x01\x02\x1b[0m\x7f end";
    return roundtrip(ctl, sizeof(ctl), ctl, sizeof(ctl) - 1);
}

static int test_utf8(void)
{
    /* é, €, U+1F600, and the largest code point: kept as they are */
    static const char ok[] = "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf";
    EXPECT(strcmp(render_str(ok, 64) + 1, "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf\"") == 0,
           "valid UTF-8 was escaped: %s", render_str(ok, 64));
    if (roundtrip(ok, 64, ok, sizeof(ok) - 1))
        return 1;
    /* malformed: each offending byte becomes \u00XX, which decodes to U+00XX */
    static const struct { const char *in; const char *text; } bad[] = {
        { "\xff", "\"\\u00ff\"" },                   /* never valid */
        { "\xc3", "\"\\u00c3\"" },                   /* truncated at the end */
        { "\xc3(", "\"\\u00c3(\"" },                 /* bad continuation */
        { "\xc0\xaf", "\"\\u00c0\\u00af\"" },        /* overlong '/' */
        { "\xe0\x80\xaf", "\"\\u00e0\\u0080\\u00af\"" }, /* overlong, 3 bytes */
        { "\xed\xa0\x80", "\"\\u00ed\\u00a0\\u0080\"" }, /* a surrogate */
        { "\xf4\x90\x80\x80", "\"\\u00f4\\u0090\\u0080\\u0080\"" }, /* past U+10FFFF */
        { "\x80x", "\"\\u0080x\"" },                  /* lone continuation */
        { "a\xe2\x82", "\"a\\u00e2\\u0082\"" },       /* cut by the field's end */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *text = render_str(bad[i].in, 64);
        EXPECT(strcmp(text, bad[i].text) == 0, "case %zu: expected %s, got %s", i, bad[i].text, text);
        EXPECT(vj_parse(text), "case %zu: %s is not JSON (%s)", i, text, vj_error);
    }
    return 0;
}

/* A fixed-size field a peer filled to the brim has no NUL: the writer
 * stops at the field's size, and splits no valid sequence it can see. */
static int test_field_without_nul(void)
{
    char key[8];
    memset(key, 'k', sizeof(key));
    char *text = render_str(key, sizeof(key));
    EXPECT(strcmp(text, "\"kkkkkkkk\"") == 0, "expected 8 k's, got %s", text);
    memcpy(key, "abcdef\xc3\xa9", 8);
    text = render_str(key, sizeof(key));
    EXPECT(strcmp(text, "\"abcdef\xc3\xa9\"") == 0, "a sequence ending at the edge: %s", text);
    text = render_str(key, 7); /* the edge cuts it */
    EXPECT(strcmp(text, "\"abcdef\\u00c3\"") == 0, "a sequence cut by the edge: %s", text);
    return 0;
}

/* Every byte string of length 1 and 2, and a thousand random ones: the
 * output always parses. */
static int test_every_byte(void)
{
    char s[3] = { 0 };
    for (int a = 1; a < 256; a++) {
        for (int b = 0; b < 256; b++) {
            s[0] = (char)a, s[1] = (char)b;
            char *text = render_str(s, 2);
            EXPECT(vj_parse(text), "bytes %02x %02x gave %s, not JSON (%s)", a, b, text, vj_error);
        }
    }
    uint64_t x = 88172645463325252u;
    char r[64];
    for (int round = 0; round < 1000; round++) {
        for (size_t i = 0; i < sizeof(r); i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            r[i] = (char)(x % 255 + 1);
        }
        char *text = render_str(r, sizeof(r));
        EXPECT(vj_parse(text), "round %d gave %s, not JSON (%s)", round, text, vj_error);
    }
    return 0;
}

static int test_counters(void)
{
    static const struct { uint64_t v; const char *text; } cases[] = {
        { 0, "0" },
        { 42, "42" },
        { (UINT64_C(1) << 53) - 1, "9007199254740991" },
        { UINT64_C(1) << 53, "9007199254740992" },
        { (UINT64_C(1) << 53) + 1, "\"9007199254740993\"" },
        { UINT64_MAX, "\"18446744073709551615\"" },
    };
    char buf[64];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        FILE *fp = fmemopen(buf, sizeof(buf), "w");
        json_u64(fp, cases[i].v);
        fclose(fp);
        EXPECT(strcmp(buf, cases[i].text) == 0, "json_u64(%llu): expected %s, got %s",
               (unsigned long long)cases[i].v, cases[i].text, buf);
    }
    FILE *fp = fmemopen(buf, sizeof(buf), "w");
    json_hex(fp, 0);
    fputc(' ', fp);
    json_hex(fp, UINT64_C(0x8000000000000005));
    fclose(fp);
    EXPECT(strcmp(buf, "\"0x0\" \"0x8000000000000005\"") == 0, "json_hex: %s", buf);
    return 0;
}

VT_MAIN(VT_CASE(test_plain_and_escapes), VT_CASE(test_utf8), VT_CASE(test_field_without_nul),
        VT_CASE(test_every_byte), VT_CASE(test_counters))
