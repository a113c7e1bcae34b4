/* SPDX-License-Identifier: MIT */
/*
 * Description: the tool's JSON writers (tools/json.c, compiled in here):
 * every string a hostile file could hold comes out as a string a strict
 * JSON reader accepts and decodes to the same text (quotes, backslashes,
 * control characters, DEL, valid UTF-8 kept, each byte of malformed UTF-8
 * as \u00XX, C1 and bidi controls escaped too), a field without a NUL
 * stops at its size, and counters are numbers up to 2^53 and strings past
 * it; and the human lines' escaping (tools/escape.c): nothing a terminal
 * acts on comes out of it, whatever the bytes.
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

/* JSON escapes what a terminal acts on beyond C0: the C1 controls
 * (U+009B is a one-character CSI), the separators, the bidi controls. */
static int test_json_c1(void)
{
    static const struct { const char *in, *out; } cases[] = {
        { "\xc2\x9b" "2J", "\"\\u009b2J\"" },
        { "\xc2\x80\xc2\x9f\xc2\xa0", "\"\\u0080\\u009f\xc2\xa0\"" }, /* U+00A0 is text */
        { "a\xe2\x80\xae" "b\xe2\x80\xa8", "\"a\\u202eb\\u2028\"" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *text = render_str(cases[i].in, 64);
        EXPECT(strcmp(text, cases[i].out) == 0, "case %zu: expected %s, got %s", i, cases[i].out, text);
        EXPECT(vj_parse(text), "case %zu: not JSON", i);
    }
    return 0;
}

/* The human lines' escaping (tool_esc): text and UTF-8 as they are, a
 * backslash doubled, C0, DEL and malformed bytes as \xNN, C1 and bidi
 * controls as \uNNNN; a cut buffer never holds half an escape. */
static char *render_esc(const char *s)
{
    static char buf[4096];
    FILE *fp = fmemopen(buf, sizeof(buf), "w");
    tool_esc(fp, s, SIZE_MAX);
    fclose(fp);
    return buf;
}

static int test_human_escape(void)
{
    static const struct { const char *in, *out; } cases[] = {
        { "pool.hb", "pool.hb" },
        { "caf\xc3\xa9 \xe2\x82\xac", "caf\xc3\xa9 \xe2\x82\xac" },
        { "a\\b", "a\\\\b" },
        { "\x1b]0;x\x07", "\\x1b]0;x\\x07" },
        { "\n\t\x7f", "\\x0a\\x09\\x7f" },
        { "\xc2\x9b" "2J", "\\u009b2J" },
        { "\xff\xc3(", "\\xff\\xc3(" },
        { "\xe2\x80\xae" "evil", "\\u202eevil" },
        { "say \"hi\"", "say \"hi\"" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *text = render_esc(cases[i].in);
        EXPECT(strcmp(text, cases[i].out) == 0, "case %zu: expected '%s', got '%s'", i, cases[i].out, text);
        char b[64];
        tool_esc_buf(b, sizeof(b), cases[i].in, SIZE_MAX, false);
        EXPECT(strcmp(b, text) == 0, "case %zu: tool_esc_buf '%s', tool_esc '%s'", i, b, text);
    }
    char q[64];
    tool_esc_buf(q, sizeof(q), "say \"hi\"", SIZE_MAX, true);
    EXPECT(strcmp(q, "say \\\"hi\\\"") == 0, "quoted: '%s'", q);
    /* Cut: 6 bytes of room hold "ab" and one whole \x1b, not half. */
    char cut[7];
    size_t n = tool_esc_buf(cut, sizeof(cut), "ab\x1b\x1b", SIZE_MAX, false);
    EXPECT(strcmp(cut, "ab\\x1b") == 0 && n == 6, "cut: '%s' (%zu)", cut, n);
    /* Every byte pair: nothing a terminal acts on comes out. */
    char s[3] = { 0 };
    for (int a = 1; a < 256; a++) {
        for (int c = 0; c < 256; c++) {
            s[0] = (char)a, s[1] = (char)c;
            const char *t = render_esc(s);
            EXPECT(!vt_unclean(t) && !strchr(t, '\n'), "bytes %02x %02x gave %s (%s)", a, c, t, vt_unclean(t));
        }
    }
    return 0;
}

VT_MAIN(VT_CASE(test_plain_and_escapes), VT_CASE(test_utf8), VT_CASE(test_field_without_nul),
        VT_CASE(test_every_byte), VT_CASE(test_counters), VT_CASE(test_json_c1), VT_CASE(test_human_escape))
