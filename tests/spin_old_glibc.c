/* SPDX-License-Identifier: MIT */
/*
 * Description: src/spin_internal.h where <sys/platform/x86.h> is glibc
 * 2.32's (tests/stubs/glibc-2.32: CPU_FEATURE_USABLE, no
 * CPU_FEATURE_ACTIVE) compiles, taking the cpuid fallback. CTest compiles
 * it with -fsyntax-only, the stub's directory first on the include path.
 */
#include "spin_internal.h"

#ifdef VIGIL_GLIBC_CPU_FEATURES
#error "glibc 2.32's header taken for 2.33's"
#endif

int main(void)
{
    return vigil_cpu_has_cas16() && vigil_cpu_has_avx2() ? 0 : 1;
}
