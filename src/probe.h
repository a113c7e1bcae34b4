/* SPDX-License-Identifier: MIT */
/* Judging whether a local process is alive, for vigil_hb_probe, the
 * probe-assisted failover scan and the election lock: the judge and this
 * process's cached identity are process identity's (proc.h); this header
 * stays for the code that includes it by this name. */
#ifndef VIGIL_SRC_PROBE_H
#define VIGIL_SRC_PROBE_H

#include <vigil/common.h>
#include "proc.h"

#endif
