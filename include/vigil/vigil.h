/* SPDX-License-Identifier: MIT */
/*
 * vigil: liveness and coordination between processes.
 * The umbrella header; the etcd adapter has its own, <vigil/etcd.h>.
 */
#ifndef VIGIL_VIGIL_H
#define VIGIL_VIGIL_H

#include <vigil/common.h>
#include <vigil/heartbeat.h>
#include <vigil/barrier.h>
#include <vigil/lease.h>
#include <vigil/failover.h>

#endif
