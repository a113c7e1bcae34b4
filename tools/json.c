/* SPDX-License-Identifier: MIT */
/*
 * JSON numbers: counters are numbers while a double holds them exactly.
 * (Strings: json_str, in escape.c beside the human lines' escaping.)
 */
#include "vigil.h"

#include <inttypes.h>

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
