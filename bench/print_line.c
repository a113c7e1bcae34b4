/* SPDX-License-Identifier: MIT */
/* bench_tool's baseline for `vigil --version`: a C program that prints a
 * line, built with the same compiler and flags. */
#include <stdio.h>

int main(void)
{
    return puts("print_line 1.0") < 0;
}
