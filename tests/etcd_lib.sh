# Sourced by etcd_server.sh and etcd_cluster.sh: ports and processes.

# A port in 20000..59999 that no socket of any state holds (tcp and tcp6),
# none of the ports given.
free_port() {
    tries=0
    while [ $tries -lt 100 ]; do
        tries=$((tries + 1))
        r=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
        p=$((20000 + r % 40000))
        case " $* " in *" $p "*) continue ;; esac
        hex=$(printf '%04X' "$p")
        if ! cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
            awk -v h=":$hex" 'index($2, h) == length($2) - 4 { f = 1 } END { exit !f }'; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

# Is the pid in PIDFILE a live etcd (not a reused pid)? An empty command
# line is a process in the middle of its exec (the new image's arguments
# are not set up yet), which a restart's first look can meet: alive,
# unless it is a zombie.
etcd_alive() {
    [ -f "$1" ] || return 1
    _pid=$(cat "$1")
    [ -n "$_pid" ] && kill -0 "$_pid" 2>/dev/null || return 1
    _cmd=$(tr '\0' ' ' <"/proc/$_pid/cmdline" 2>/dev/null)
    if [ -z "$_cmd" ]; then
        ! pid_gone "$_pid"
    else
        echo "$_cmd" | grep -q etcd
    fi
}

# Has pid gone (exited, or a zombie its new parent has not reaped yet)?
# A zombie main thread is not enough: /proc shows Z as soon as it has
# exited, while the other threads may still be exiting with the
# process's sockets open (a restart on the same ports then finds them
# in use). Gone once it is the last of its threads.
pid_gone() {
    ! kill -0 "$1" 2>/dev/null && return 0
    [ "$(sed -n 's/^[0-9]* (.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null)" = Z ] &&
        [ "$(ls /proc/"$1"/task 2>/dev/null | wc -l)" -le 1 ]
}

# SIGSTOP to pid, and wait (bounded: 10 s) until every thread of it is
# stopped: kill(2) returns before a group stop takes hold (the thread the
# kernel picks to start it must get a CPU first, and on a loaded machine
# the other threads go on serving meanwhile), so a freeze that only sent
# the signal could be answered for a while after it. SIGCONT needs no such
# wait (it wakes every thread as it is sent). 0, or 1 if still running.
stop_and_wait() {
    kill -STOP "$1" || return 1
    _i=0
    while [ $_i -lt 2000 ]; do
        # Every thread's state in one read (quick: the test that froze
        # it wants to act on a hung member before its clients notice);
        # what is left once stopped threads (T, t) are taken out runs.
        _run=$(cat /proc/"$1"/task/*/stat 2>/dev/null | sed -n 's/^.*) \(.\).*/\1/p' | tr -d 'Tt\n')
        [ -z "$_run" ] && return 0
        _i=$((_i + 1))
        sleep 0.005
    done
    return 1
}

# Stops the etcd in PIDFILE with SIG (TERM by default), bounded: TERM gets
# 10 s, then KILL. Removes PIDFILE.
etcd_halt() {
    etcd_alive "$1" || { rm -f "$1"; return 0; }
    _pid=$(cat "$1")
    kill -"${2:-TERM}" "$_pid" 2>/dev/null
    kill -CONT "$_pid" 2>/dev/null # a frozen server must run to die of TERM
    _i=0
    while ! pid_gone "$_pid" && [ $_i -lt 100 ]; do
        _i=$((_i + 1))
        sleep 0.1
    done
    if ! pid_gone "$_pid"; then
        kill -KILL "$_pid" 2>/dev/null
        sleep 0.2
    fi
    rm -f "$1"
}
