// SPDX-License-Identifier: MIT

// The anchor of bench/peer/bench_peer.c: etcd's own Go client (clientv3,
// its concurrency package and contrib/recipes, as Debian's
// golang-etcd-server-dev ships them), timed on the same etcd as vigil, in
// the same run. A long-lived child of bench_peer, driven over a pipe so
// that no process starts inside a timed sample: one command a line on
// standard input, one answer a line on standard output ("ok ..." or
// "err why").
//
//	prep OP [N]    make OP's clients, sessions and members (outside any sample)
//	run OP COUNT   COUNT samples of OP: "ok NS NS ..."
//	tput OP MS     OP's lockers lock and unlock flat out for MS ms:
//	               "ok ELAPSED_NS LATENCY_NS ..." (one latency per lock + unlock)
//	hold           wake: the holder locks, the waiter goroutine queues
//	release        wake: the holder unlocks; "ok NS", from its call to
//	               the waiter's Lock returning
//	drop OP        close OP's sessions and clients
//	version        "ok clientv3 VERSION, GO VERSION"
//
// Every actor (holder, waiter, leader, observer, member, locker) has a
// client of its own, one connection each, as separate processes would;
// tput-shared gives its lockers one client between them, which gRPC
// multiplexes. Sessions have a TTL of 60 s, etcd's default.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
	recipe "go.etcd.io/etcd/contrib/recipes"
	"go.etcd.io/etcd/version"
	"go.uber.org/zap"
)

const (
	ttl     = 60               // seconds, a session's (concurrency's default)
	patient = 60 * time.Second // the bound on any one call
	prefix  = "bench-peer/go/"
)

var endpoints []string

// An actor: a client of its own and a session on it.
type actor struct {
	cli *clientv3.Client
	s   *concurrency.Session
}

func newClient() (*clientv3.Client, error) {
	quiet := zap.NewProductionConfig()
	quiet.Level = zap.NewAtomicLevelAt(zap.ErrorLevel)
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, LogConfig: &quiet})
}

func newActor(cli *clientv3.Client) (*actor, error) {
	own := cli == nil
	if own {
		var err error
		if cli, err = newClient(); err != nil {
			return nil, err
		}
	}
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttl))
	if err != nil {
		if own {
			cli.Close()
		}
		return nil, err
	}
	return &actor{cli, s}, nil
}

func newActors(n int, shared *clientv3.Client) ([]*actor, error) {
	as := make([]*actor, 0, n)
	for i := 0; i < n; i++ {
		a, err := newActor(shared)
		if err != nil {
			closeActors(as)
			return nil, err
		}
		as = append(as, a)
	}
	return as, nil
}

func closeActors(as []*actor) {
	var clis []*clientv3.Client
	for _, a := range as {
		a.s.Close()
		if len(clis) == 0 || clis[len(clis)-1] != a.cli {
			clis = append(clis, a.cli)
		}
	}
	for _, c := range clis {
		c.Close()
	}
}

func bounded() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), patient)
}

// ---- the operations ------------------------------------------------------------

type peer struct {
	actors map[string][]*actor // by op
	seq    int                 // names that never recur within the run
	// the observer of "observe": proclaimed values and when each came
	leader  *concurrency.Election
	seen    chan observed
	stopObs context.CancelFunc
	// the queued waiter of "wake"
	waiter chan time.Time
	held   *concurrency.Mutex
}

type observed struct {
	val string
	at  time.Time
}

func (p *peer) prep(op string, n int) error {
	if _, ok := p.actors[op]; ok {
		return fmt.Errorf("%s prepared already", op)
	}
	var as []*actor
	var err error
	switch op {
	case "lock", "elect", "unit":
		as, err = newActors(1, nil)
	case "lease", "put", "range": // a client alone (lease: a session of its own each time)
		var cli *clientv3.Client
		if cli, err = newClient(); err == nil {
			as = []*actor{{cli: cli}}
		}
	case "wake", "observe": // [0] the holder or leader, [1] the waiter or observer
		as, err = newActors(2, nil)
	case "round", "tput":
		as, err = newActors(n, nil)
	case "tput-shared":
		var cli *clientv3.Client
		if cli, err = newClient(); err == nil {
			if as, err = newActors(n, cli); err != nil {
				cli.Close()
			}
		}
	default:
		return fmt.Errorf("unknown op %q", op)
	}
	if err != nil {
		return err
	}
	p.actors[op] = as
	if op == "observe" {
		err = p.startObserver(as)
	}
	return err
}

func (p *peer) drop(op string) {
	as := p.actors[op]
	if op == "observe" && p.stopObs != nil {
		p.stopObs()
		p.stopObs = nil
	}
	if len(as) == 1 && as[0].s == nil {
		as[0].cli.Close()
	} else {
		closeActors(as)
	}
	delete(p.actors, op)
}

// The leader campaigns once; the observer's goroutine stamps every value it
// is told, as it is told it.
func (p *peer) startObserver(as []*actor) error {
	ctx, cancel := bounded()
	defer cancel()
	p.leader = concurrency.NewElection(as[0].s, prefix+"observe")
	if err := p.leader.Campaign(ctx, "start"); err != nil {
		return err
	}
	octx, stop := context.WithCancel(context.Background())
	p.stopObs = stop
	p.seen = make(chan observed, 1024)
	ch := concurrency.NewElection(as[1].s, prefix+"observe").Observe(octx)
	go func() {
		for r := range ch {
			if len(r.Kvs) > 0 {
				p.seen <- observed{string(r.Kvs[0].Value), time.Now()}
			}
		}
	}()
	_, err := p.awaitAt("start")
	return err
}

// Waits for the observer to be told val: when it was.
func (p *peer) awaitAt(val string) (time.Time, error) {
	timeout := time.After(patient)
	for {
		select {
		case o := <-p.seen:
			if o.val == val {
				return o.at, nil
			}
		case <-timeout:
			return time.Time{}, fmt.Errorf("the observer was never told %q", val)
		}
	}
}

func (p *peer) name(what string) string {
	p.seq++
	return fmt.Sprintf("%s%s/%d", prefix, what, p.seq)
}

// One sample of op: its duration in ns.
func (p *peer) sample(op string, as []*actor) (int64, error) {
	ctx, cancel := bounded()
	defer cancel()
	t0 := time.Now()
	switch op {
	case "lock": // Lock + Unlock on a kept session
		m := concurrency.NewMutex(as[0].s, prefix+"lock")
		if err := m.Lock(ctx); err != nil {
			return 0, err
		}
		if err := m.Unlock(ctx); err != nil {
			return 0, err
		}
	case "lease": // a session each time: NewSession + Lock + Unlock + Close
		s, err := concurrency.NewSession(as[0].cli, concurrency.WithTTL(ttl))
		if err != nil {
			return 0, err
		}
		m := concurrency.NewMutex(s, prefix+"lease")
		if err = m.Lock(ctx); err == nil {
			err = m.Unlock(ctx)
		}
		if cerr := s.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, err
		}
	case "put": // the floor: one bare request
		if _, err := as[0].cli.Put(ctx, prefix+"floor", "v"); err != nil {
			return 0, err
		}
	case "range":
		if _, err := as[0].cli.Get(ctx, prefix+"floor"); err != nil {
			return 0, err
		}
	case "elect": // Campaign + Resign on a kept session
		e := concurrency.NewElection(as[0].s, prefix+"elect")
		if err := e.Campaign(ctx, "go"); err != nil {
			return 0, err
		}
		if err := e.Resign(ctx); err != nil {
			return 0, err
		}
	case "observe": // Proclaim, to the observer being told
		val := p.name("v")
		if err := p.leader.Proclaim(ctx, val); err != nil {
			return 0, err
		}
		at, err := p.awaitAt(val)
		if err != nil {
			return 0, err
		}
		return at.Sub(t0).Nanoseconds(), nil
	case "unit": // Enqueue + Dequeue
		q := recipe.NewQueue(as[0].cli, prefix+"queue")
		val := p.name("u")
		if err := q.Enqueue(val); err != nil {
			return 0, err
		}
		got, err := q.Dequeue()
		if err != nil {
			return 0, err
		}
		if got != val {
			return 0, fmt.Errorf("dequeued %q, enqueued %q", got, val)
		}
	case "round": // DoubleBarrier Enter + Leave, every member: to the last one's return
		key := p.name(fmt.Sprintf("round%d", len(as)))
		var wg sync.WaitGroup
		var mu sync.Mutex
		var last time.Time
		var ferr error
		for _, a := range as {
			wg.Add(1)
			go func(a *actor) {
				defer wg.Done()
				b := recipe.NewDoubleBarrier(a.s, key, len(as))
				err := b.Enter()
				if err == nil {
					err = b.Leave()
				}
				now := time.Now()
				mu.Lock()
				if now.After(last) {
					last = now
				}
				if err != nil && ferr == nil {
					ferr = err
				}
				mu.Unlock()
			}(a)
		}
		wg.Wait()
		if ferr != nil {
			return 0, ferr
		}
		return last.Sub(t0).Nanoseconds(), nil
	default:
		return 0, fmt.Errorf("unknown op %q", op)
	}
	return time.Since(t0).Nanoseconds(), nil
}

func (p *peer) run(op string, n int) ([]int64, error) {
	as, ok := p.actors[op]
	if !ok {
		return nil, fmt.Errorf("%s not prepared", op)
	}
	out := make([]int64, 0, n)
	for i := 0; i < n; i++ {
		ns, err := p.sample(op, as)
		if err != nil {
			return nil, err
		}
		out = append(out, ns)
	}
	return out, nil
}

// Every locker locks and unlocks a key of its own until the deadline.
func (p *peer) tput(op string, ms int) (int64, []int64, error) {
	as, ok := p.actors[op]
	if !ok {
		return 0, nil, fmt.Errorf("%s not prepared", op)
	}
	var wg sync.WaitGroup
	lat := make([][]int64, len(as))
	errs := make([]error, len(as))
	t0 := time.Now()
	deadline := t0.Add(time.Duration(ms) * time.Millisecond)
	for i, a := range as {
		wg.Add(1)
		go func(i int, a *actor) {
			defer wg.Done()
			m := concurrency.NewMutex(a.s, fmt.Sprintf("%stput/%d", prefix, i))
			for time.Now().Before(deadline) {
				ctx, cancel := bounded()
				s := time.Now()
				err := m.Lock(ctx)
				if err == nil {
					err = m.Unlock(ctx)
				}
				cancel()
				if err != nil {
					errs[i] = err
					return
				}
				lat[i] = append(lat[i], time.Since(s).Nanoseconds())
			}
		}(i, a)
	}
	wg.Wait()
	elapsed := time.Since(t0).Nanoseconds()
	var all []int64
	for i := range as {
		if errs[i] != nil {
			return 0, nil, errs[i]
		}
		all = append(all, lat[i]...)
	}
	return elapsed, all, nil
}

// wake: the holder holds, the waiter queues behind it (bench_peer then
// waits until etcd shows the waiter's key and its watch).
func (p *peer) hold() error {
	as, ok := p.actors["wake"]
	if !ok || p.held != nil {
		return errors.New("wake not prepared, or held already")
	}
	ctx, cancel := bounded()
	defer cancel()
	h := concurrency.NewMutex(as[0].s, prefix+"wake")
	if err := h.Lock(ctx); err != nil {
		return err
	}
	p.held = h
	p.waiter = make(chan time.Time, 1)
	go func() {
		ctx, cancel := bounded()
		defer cancel()
		w := concurrency.NewMutex(as[1].s, prefix+"wake")
		if err := w.Lock(ctx); err != nil {
			p.waiter <- time.Time{}
			return
		}
		at := time.Now()
		w.Unlock(ctx) // after the stamp: the next sample's holder waits for it
		p.waiter <- at
	}()
	return nil
}

func (p *peer) release() (int64, error) {
	if p.held == nil {
		return 0, errors.New("nothing held")
	}
	ctx, cancel := bounded()
	defer cancel()
	t0 := time.Now()
	err := p.held.Unlock(ctx)
	p.held = nil
	if err != nil {
		return 0, err
	}
	select {
	case at := <-p.waiter:
		if at.IsZero() {
			return 0, errors.New("the waiter's Lock failed")
		}
		return at.Sub(t0).Nanoseconds(), nil
	case <-time.After(patient):
		return 0, errors.New("the waiter never got the lock")
	}
}

func reply(w *bufio.Writer, ns []int64, err error) {
	if err != nil {
		fmt.Fprintf(w, "err %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
	} else {
		w.WriteString("ok")
		for _, v := range ns {
			w.WriteString(" ")
			w.WriteString(strconv.FormatInt(v, 10))
		}
		w.WriteString("\n")
	}
	w.Flush()
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: peer ENDPOINTS (driven by bench_peer over standard input)")
		os.Exit(2)
	}
	endpoints = strings.Split(os.Args[1], ",")
	p := &peer{actors: map[string][]*actor{}}
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		arg := func(i int) int {
			if len(f) <= i {
				return 0
			}
			v, _ := strconv.Atoi(f[i])
			return v
		}
		op := ""
		if len(f) > 1 {
			op = f[1]
		}
		switch f[0] {
		case "prep":
			reply(out, nil, p.prep(op, arg(2)))
		case "run":
			ns, err := p.run(op, arg(2))
			reply(out, ns, err)
		case "tput":
			elapsed, ns, err := p.tput(op, arg(2))
			reply(out, append([]int64{elapsed}, ns...), err)
		case "hold":
			reply(out, nil, p.hold())
		case "release":
			ns, err := p.release()
			reply(out, []int64{ns}, err)
		case "drop":
			p.drop(op)
			reply(out, nil, nil)
		case "version":
			fmt.Fprintf(out, "ok clientv3 %s, %s\n", version.Version, runtime.Version())
			out.Flush()
		case "quit":
			for op := range p.actors {
				p.drop(op)
			}
			reply(out, nil, nil)
			return
		default:
			reply(out, nil, fmt.Errorf("unknown command %q", f[0]))
		}
	}
	for op := range p.actors { // stdin closed: bench_peer went away
		p.drop(op)
	}
}
