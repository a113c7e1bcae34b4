/* SPDX-License-Identifier: MIT */
/*
 * A stand-in for glibc 2.32's <sys/platform/x86.h>, the first glibc to ship
 * it: its queries were HAS_CPU_FEATURE and CPU_FEATURE_USABLE, over
 * __x86_get_cpu_features; CPU_FEATURE_PRESENT and CPU_FEATURE_ACTIVE
 * replaced them in 2.33. Only the names matter here (spin_old_glibc.c).
 */
#ifndef VIGIL_TEST_STUB_SYS_PLATFORM_X86_H
#define VIGIL_TEST_STUB_SYS_PLATFORM_X86_H

struct cpu_features;
extern const struct cpu_features *__x86_get_cpu_features(unsigned int max);

#define HAS_CPU_FEATURE(name)    (__x86_get_cpu_features(0) != 0)
#define CPU_FEATURE_USABLE(name) (__x86_get_cpu_features(0) != 0)

#endif
