/* SPDX-License-Identifier: MIT */
/*
 * Durations, the one parser every option of the tool that takes a time
 * goes through: "500ms", "10s", "1.5s", "2m", "1h30m", or a bare number
 * in the option's own unit (milliseconds for all of today's options), so
 * that `--ttl 10000` keeps its old meaning and `--ttl 10s` says what
 * flock(1) and etcdctl users mean. Go's time.ParseDuration and systemd's
 * time spans read the same way; nothing here accepts a sign, a space or
 * an exponent, and a fraction finer than a nanosecond is an error rather
 * than a silent rounding.
 */
#include "vigil.h"

#include <string.h>

#define NS_PER_MS UINT64_C(1000000)

struct unit {
    const char *name;
    uint64_t    ns;
};

/* Longest names first is not needed: a unit is the whole run of letters. */
static const struct unit units[] = {
    { "ns", 1 },
    { "us", 1000 },
    { "\xc2\xb5s", 1000 }, /* µs */
    { "ms", NS_PER_MS },
    { "s", 1000 * NS_PER_MS },
    { "sec", 1000 * NS_PER_MS },
    { "m", 60000 * NS_PER_MS },
    { "min", 60000 * NS_PER_MS },
    { "h", 3600000 * NS_PER_MS },
    { "d", 86400000 * NS_PER_MS },
};

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* A unit's letters: ASCII letters and the two bytes of µ. */
static bool is_unit_byte(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (unsigned char)c >= 0x80;
}

bool tool_duration_bare(const char *s)
{
    if (!s || !*s)
        return false;
    for (; *s; s++)
        if (!is_digit(*s))
            return false;
    return true;
}

/* One term, NUMBER[.FRACTION]UNIT, at *s: adds its nanoseconds to *total.
 * 0, or -1 with *why. */
static int term(const char **s, uint64_t *total, const char **why)
{
    const char *p = *s;
    uint64_t whole = 0;
    bool digits = false;
    for (; is_digit(*p); p++, digits = true) {
        if (__builtin_mul_overflow(whole, 10, &whole) || __builtin_add_overflow(whole, (uint64_t)(*p - '0'), &whole))
            return *why = "too long", -1;
    }
    const char *frac = NULL, *frac_end = NULL;
    if (*p == '.') {
        frac = ++p;
        while (is_digit(*p))
            p++;
        frac_end = p;
        digits |= frac_end > frac;
    }
    if (!digits)
        return *why = "a unit without a number", -1;
    const char *u = p;
    while (*p && is_unit_byte(*p))
        p++;
    if (p == u)
        return *why = "a number without a unit", -1;
    const struct unit *un = NULL;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]) && !un; i++)
        if (strlen(units[i].name) == (size_t)(p - u) && memcmp(units[i].name, u, (size_t)(p - u)) == 0)
            un = &units[i];
    if (!un)
        return *why = "an unknown unit", -1;
    uint64_t ns;
    if (__builtin_mul_overflow(whole, un->ns, &ns))
        return *why = "too long", -1;
    /* The fraction digit by digit, each worth a tenth of the one before:
     * exact while the unit divides by ten, and any digit past that would
     * be finer than a nanosecond. */
    uint64_t place = un->ns;
    for (const char *d = frac; d && d < frac_end; d++) {
        if (place % 10 != 0) {
            if (*d != '0')
                return *why = "finer than a nanosecond", -1;
            continue;
        }
        place /= 10;
        if (__builtin_add_overflow(ns, (uint64_t)(*d - '0') * place, &ns))
            return *why = "too long", -1;
    }
    if (__builtin_add_overflow(*total, ns, total))
        return *why = "too long", -1;
    *s = p;
    return 0;
}

int tool_parse_duration(const char *s, uint64_t bare_unit_ns, uint64_t *ns, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    if (!s || !*s)
        return *why = "empty", -1;
    if (tool_duration_bare(s)) {
        uint64_t v;
        if (tool_parse_u64(s, &v) < 0 || __builtin_mul_overflow(v, bare_unit_ns, &v))
            return *why = "too long", -1;
        *ns = v;
        return 0;
    }
    uint64_t total = 0;
    for (const char *p = s; *p;)
        if (term(&p, &total, why) < 0)
            return -1;
    *ns = total;
    return 0;
}

void tool_format_ms(uint64_t ms, char *buf, size_t len)
{
    if (ms != 0 && ms % 3600000 == 0)
        snprintf(buf, len, "%lluh", (unsigned long long)(ms / 3600000));
    else if (ms != 0 && ms % 60000 == 0)
        snprintf(buf, len, "%llum", (unsigned long long)(ms / 60000));
    else if (ms % 1000 == 0)
        snprintf(buf, len, "%llus", (unsigned long long)(ms / 1000));
    else if (ms < 1000)
        snprintf(buf, len, "%llums", (unsigned long long)ms);
    else {
        /* seconds with the milliseconds as a fraction, no trailing zeros */
        unsigned frac = (unsigned)(ms % 1000), digits = 3;
        while (frac % 10 == 0)
            frac /= 10, digits--;
        snprintf(buf, len, "%llu.%0*us", (unsigned long long)(ms / 1000), (int)digits, frac);
    }
}

void tool_format_ms_about(uint64_t ms, char *buf, size_t len)
{
    /* Rounded to the nearest unit a reader counts in: tenths below 10 s,
     * whole seconds below 10 min, whole minutes below 10 h, then hours. */
    unsigned long long v = ms;
    if (v < 1000)
        snprintf(buf, len, "%llums", v);
    else if (v < 9950)
        snprintf(buf, len, "%llu.%llus", (v + 50) / 1000, (v + 50) % 1000 / 100);
    else if (v < 599500)
        snprintf(buf, len, "%llus", (v + 500) / 1000);
    else if (v < 35970000)
        snprintf(buf, len, "%llum", (v + 30000) / 60000);
    else
        snprintf(buf, len, "%lluh", (v + 1800000) / 3600000);
}

int tool_parse_ms(const char *s, uint64_t *ms, const char **why)
{
    uint64_t ns;
    if (tool_parse_duration(s, NS_PER_MS, &ns, why) < 0)
        return -1;
    if (ns % NS_PER_MS != 0) {
        if (why)
            *why = "not a whole number of milliseconds";
        return -1;
    }
    *ms = ns / NS_PER_MS;
    return 0;
}
