#!/bin/sh
# The unprivileged user the attack tests run as (tests/usertest.h): made
# here when this runs as root (make check, ctest), a system user with its
# own group, no home and no shell, the same on every run. Not root: said,
# and the tests that need it report themselves skipped.
user=vigil-test
if [ "$(id -u)" != 0 ]; then
    echo "test_user: not root: the attacks as another user ($user) will be skipped"
    exit 0
fi
# Several checkouts may run this at once: a useradd that loses the race
# (the user exists, or /etc/passwd is locked) is tried again.
i=0
while ! getent passwd "$user" >/dev/null; do
    useradd --system --user-group --no-create-home --shell /usr/sbin/nologin "$user" 2>/dev/null && break
    i=$((i + 1))
    if [ "$i" -ge 50 ]; then
        echo "test_user: could not make the user $user" >&2
        exit 1
    fi
    sleep 0.1
done
echo "test_user: $user is uid $(id -u "$user"), group $(id -gn "$user")"
