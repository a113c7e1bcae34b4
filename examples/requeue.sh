#!/bin/sh
# requeue.sh: run by `vigil failover --exec` once per reclaimed slot, in
# the pool's spool (the watchdog's working directory: the unit's
# WorkingDirectory=). Each reclaimed unit's claim goes back to queue/; a
# unit with no claim, or a spool that is not there, is said on stderr and
# fails the run, so that the watchdog logs it with its units.
spool=$(pwd)
if [ ! -d queue ] || [ ! -d claimed ]; then
    echo "requeue.sh: no queue/ and claimed/ in $spool: run it in the spool (WorkingDirectory=)" >&2
    exit 1
fi
status=0
for unit in $(echo "$VIGIL_RECLAIM_UNITS" | tr , ' '); do
    found=0
    for claim in "claimed/$VIGIL_RECLAIM_SLOT.$unit.$VIGIL_RECLAIM_PID".*; do
        [ -e "$claim" ] || continue
        found=1
        job=${claim#claimed/*.*.*.}
        mv "$claim" "queue/$job" && echo "requeued $job ($VIGIL_RECLAIM_REASON)" || status=1
    done
    if [ "$found" = 0 ]; then
        echo "requeue.sh: slot $VIGIL_RECLAIM_SLOT unit $unit (pid $VIGIL_RECLAIM_PID): no claim in $spool/claimed" >&2
        status=1
    fi
done
exit "$status"
