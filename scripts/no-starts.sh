# Sourced (POSIX sh) by scripts/deps.sh and scripts/deb-test.sh: while
# packages install, a policy-rc.d refuses every service start
# (invoke-rc.d and deb-systemd-invoke ask it), and the one that was there
# before, the admin's own, is put back afterwards. $root prefixes the
# paths (tests/deps_policy.sh runs deps.sh in a scratch root).
#
#   deny_starts || exit 1
#   trap allow_starts EXIT      (once or more: only the first call acts)
#
# One script at a time between the two (flock on $starts_lock, waited for
# up to 10 minutes): two at once, as deps.sh of one checkout and
# deb-test.sh of another, would each save the other's policy-rc.d as the
# admin's, and the last to finish would put that back, or none.
policy="${root:-}/usr/sbin/policy-rc.d"
saved="${root:-}/usr/sbin/policy-rc.d.vigil-deps-saved"
starts_lock="${root:-}/run/lock/vigil-no-starts.lock"
starts_denied=0

allow_starts() {
    [ "$starts_denied" = 1 ] || return 0
    starts_denied=0
    if [ -e "$saved" ] || [ -L "$saved" ]; then
        mv -f "$saved" "$policy"
    else
        rm -f "$policy"
    fi
    exec 8>&- # the lock, released (apt-get is never handed it: 8>&-)
}

deny_starts() {
    if command -v flock >/dev/null 2>&1; then
        mkdir -p "${starts_lock%/*}" && exec 8>"$starts_lock" || return 1
        flock -w 600 8 || { echo "no-starts: $starts_lock held for 10 minutes: another install never ended" >&2; return 1; }
    fi
    # A saved one left by a run that was killed is the admin's: kept, and
    # the policy-rc.d in place (that run's) replaced.
    if [ -e "$saved" ] || [ -L "$saved" ]; then
        :
    elif [ -e "$policy" ] || [ -L "$policy" ]; then
        mv -f "$policy" "$saved" || return 1
    fi
    starts_denied=1
    mkdir -p "${policy%/*}" &&
        printf '#!/bin/sh\n# vigil: no service starts while packages install\nexit 101\n' >"$policy" &&
        chmod 755 "$policy"
}
