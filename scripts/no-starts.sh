# Sourced (POSIX sh) by scripts/deps.sh and scripts/deb-test.sh: while
# packages install, a policy-rc.d refuses every service start
# (invoke-rc.d and deb-systemd-invoke ask it), and the one that was there
# before, the admin's own, is put back afterwards. $root prefixes the
# paths (tests/deps_policy.sh runs deps.sh in a scratch root).
#
#   deny_starts || exit 1
#   trap allow_starts EXIT      (once or more: only the first call acts)
policy="${root:-}/usr/sbin/policy-rc.d"
saved="${root:-}/usr/sbin/policy-rc.d.vigil-deps-saved"
starts_denied=0

allow_starts() {
    [ "$starts_denied" = 1 ] || return 0
    starts_denied=0
    if [ -e "$saved" ] || [ -L "$saved" ]; then
        mv -f "$saved" "$policy"
    else
        rm -f "$policy"
    fi
}

deny_starts() {
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
