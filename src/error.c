/* SPDX-License-Identifier: MIT */
#include <vigil/common.h>

#include <string.h>

const char *vigil_strerror(int err)
{
    switch (err) {
    case VIGIL_EFULL:     return "no vacant slot";
    case VIGIL_EBADFILE:  return "not a vigil file of this kind, made by another vigil version (an older one's "
                                 "file must be re-created), or size disagrees with header";
    case VIGIL_ECAPACITY: return "file's capacity differs from the one asked for";
    case VIGIL_ERANGE:    return "slot, bit, quorum or argument out of range";
    case VIGIL_EVACANT:   return "slot is vacant";
    case VIGIL_ETIMEDOUT: return "deadline passed";
    case VIGIL_ENOPEERS:  return "nothing live to wait for";
    case VIGIL_ELOST:     return "held no more: the lease was refused or expired, or the heartbeat slot was "
                                 "reclaimed by failover; the scope is someone else's now";
    case VIGIL_EBUSY:     return "held by another owner, or in the middle of a change";
    case VIGIL_ETLS:      return "TLS: the server's certificate failed verification";
    case VIGIL_EUNTRUSTED: return "another user could have made or rewritten the file (writable by everyone, "
                                  "or another user's outside a group of the caller's)";
    }
    if (err >= 0)
        return "success";
    if (err > -4096) {
        /* strerror's text for known errnos is static; glibc and musl both
         * return "Unknown error N" for the rest, which is never NULL. */
        const char *s = strerror(-err);
        if (s)
            return s;
    }
    return "unknown error";
}
