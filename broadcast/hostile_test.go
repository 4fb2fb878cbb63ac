package broadcast_test

// Hostile and odd input (issue 5): every exported entry point of package
// broadcast with out-of-range, nil, canceled, huge, repeated or reentrant
// arguments and calls. Each case states its outcome in the table (a
// hostileResult compared with cmp.Diff): an error, a value, a count, or a
// panic whose message starts with "broadcast:" for configuration mistakes.
//
// Every case runs in a testing/synctest bubble: a case that deadlocks fails
// (synctest reports the bubble's deadlock) instead of hanging, elapsed times
// are exact virtual time, and a goroutine a case leaves behind fails it.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/internal/testutil"
)

// hostileGuard bounds every wait in a case; in a bubble it fires only once
// everything else is blocked, so it is never a timing assertion.
const hostileGuard = time.Minute

// hostileResult is what a case observed. Fields a case does not set stay
// zero, and the want of the case leaves them zero too.
type hostileResult struct {
	Panic   string          // "broadcast: Func" for a panic "broadcast: Func: ..."
	Errs    []string        // results of calls, see hostileErr
	Ok      []bool          // results of TryPublish
	Values  []int           // what a watcher yielded
	Other   []int           // what a second watcher yielded
	Strings []string        // anything else
	Dropped []uint64        // Dropped() of the watchers the case names
	Stats   broadcast.Stats // at the end
	Elapsed time.Duration   // virtual time a call took
}

// hostileErr names an error by what it is: nil, one of the sentinels, an
// error of this package ("broadcast: ..."), or anything else in full.
func hostileErr(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, broadcast.ErrClosed):
		return "ErrClosed"
	case errors.Is(err, context.Canceled):
		return "Canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	case strings.HasPrefix(err.Error(), "broadcast: "):
		return "broadcast error"
	}
	return "unexpected error: " + err.Error()
}

// hostilePanic runs f and returns "" if it did not panic, "broadcast: Func"
// for a panic "broadcast: Func: details", and the whole message otherwise.
func hostilePanic(f func()) string {
	msg, panicked := testutil.PanicMessage(f)
	switch {
	case !panicked:
		return ""
	case !strings.HasPrefix(msg, "broadcast: "):
		return "panic without the package prefix: " + msg
	}
	if i := strings.Index(msg[len("broadcast: "):], ":"); i >= 0 {
		return msg[:len("broadcast: ")+i]
	}
	return msg
}

// hNew returns a broadcaster that is shut down when the case ends.
func hNew(t *testing.T, opts ...broadcast.Option) *broadcast.Broadcaster[int] {
	t.Helper()
	b := broadcast.New[int](opts...)
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	return b
}

func hWatch(t *testing.T, b *broadcast.Broadcaster[int], opts ...broadcast.Option) *broadcast.Watcher[int] {
	t.Helper()
	w, err := b.Watch(opts...)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	return w
}

func hPub(t *testing.T, b *broadcast.Broadcaster[int], vs ...int) {
	t.Helper()
	for _, v := range vs {
		if err := b.Publish(v); err != nil {
			t.Fatalf("Publish(%d): %v", v, err)
		}
	}
}

func hShutdown(t *testing.T, b *broadcast.Broadcaster[int]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hostileGuard)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func hC(t *testing.T, w *broadcast.Watcher[int]) []int {
	t.Helper()
	return testutil.Drain(t, w.C(), hostileGuard)
}

func hAll(t *testing.T, w *broadcast.Watcher[int]) []int {
	t.Helper()
	return testutil.CollectSeq(t, w.All(), -1, hostileGuard)
}

func hAsync(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// hReturned reports whether ch has a result now, without waiting.
func hReturned(ch <-chan error) (error, bool) {
	select {
	case err := <-ch:
		return err, true
	default:
		return nil, false
	}
}

// hBlock is the policy and queue length of a Block watcher of queue length n.
func hBlock(n int) []broadcast.Option {
	return []broadcast.Option{broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(n)}
}

// hLoop reads w through path ("All" or "C") in the calling goroutine,
// calling f for each value until w ends or f returns false.
func hLoop(path string, w *broadcast.Watcher[int], f func(int) bool) {
	if path == "All" {
		for v := range w.All() {
			if !f(v) {
				return
			}
		}
		return
	}
	for v := range w.C() {
		if !f(v) {
			return
		}
	}
}

type hostileCase struct {
	name string
	run  func(t *testing.T, r *hostileResult)
	want hostileResult
}

func TestHostile(t *testing.T) {
	var cases []hostileCase
	cases = append(cases, hostileConfigCases()...)
	cases = append(cases, hostileContextCases()...)
	cases = append(cases, hostilePrefixCases()...)
	cases = append(cases, hostileClosedCases()...)
	cases = append(cases, hostileStopCases()...)
	cases = append(cases, hostileReadCases()...)
	for _, path := range []string{"All", "C"} {
		cases = append(cases, hostileReentrantCases(path)...)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var got hostileResult
				c.run(t, &got)
				if d := cmp.Diff(c.want, got, cmpopts.EquateEmpty()); d != "" {
					t.Errorf("outcome (-want +got):\n%s", d)
				}
			})
		})
	}
}

// Configuration mistakes panic with the package prefix, in the function
// that is given the bad value.
func hostileConfigCases() []hostileCase {
	panics := func(name, want string, f func()) hostileCase {
		return hostileCase{
			name: name,
			run:  func(t *testing.T, r *hostileResult) { r.Panic = hostilePanic(f) },
			want: hostileResult{Panic: want},
		}
	}
	cases := []hostileCase{
		panics("WithQueueLength(0)", "broadcast: WithQueueLength", func() { broadcast.WithQueueLength(0) }),
		panics("WithQueueLength(-1)", "broadcast: WithQueueLength", func() { broadcast.WithQueueLength(-1) }),
		panics("WithQueueLength(MinInt)", "broadcast: WithQueueLength", func() { broadcast.WithQueueLength(math.MinInt) }),
		panics("WithQueueLength(MaxQueueLength+1)", "broadcast: WithQueueLength", func() { broadcast.WithQueueLength(broadcast.MaxQueueLength + 1) }),
		panics("WithQueueLength(MaxInt)", "broadcast: WithQueueLength", func() { broadcast.WithQueueLength(math.MaxInt) }),
		panics("BlockFor(0)", "broadcast: BlockFor", func() { broadcast.BlockFor(0) }),
		panics("BlockFor(-1ns)", "broadcast: BlockFor", func() { broadcast.BlockFor(-1) }),
		panics("BlockFor(MinInt64)", "broadcast: BlockFor", func() { broadcast.BlockFor(math.MinInt64) }),
		panics("WithPolicy(zero Policy)", "broadcast: WithPolicy", func() { broadcast.WithPolicy(broadcast.Policy{}) }),
		{
			name: "Policy.String, zero Policy included",
			run: func(t *testing.T, r *hostileResult) {
				for _, p := range []broadcast.Policy{{}, broadcast.Drop, broadcast.DropOldest, broadcast.Block, broadcast.BlockFor(1500 * time.Millisecond), broadcast.BlockFor(1)} {
					r.Strings = append(r.Strings, p.String())
				}
				r.Strings = append(r.Strings, fmt.Sprint(broadcast.Policy{} == broadcast.Drop))
			},
			want: hostileResult{Strings: []string{"Policy(invalid)", "Drop", "DropOldest", "Block", "BlockFor(1.5s)", "BlockFor(1ns)", "false"}},
		},
		{
			// The largest queue is accepted; All() does not allocate it.
			name: "WithQueueLength(MaxQueueLength) in New and Watch, read through All",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t, broadcast.WithQueueLength(broadcast.MaxQueueLength))
				w := hWatch(t, b)
				blk := hWatch(t, b, hBlock(broadcast.MaxQueueLength)...)
				hPub(t, b, 1, 2, 3)
				hShutdown(t, b)
				r.Values, r.Other = hAll(t, w), hAll(t, blk)
				r.Stats = b.Stats()
			},
			want: hostileResult{Values: []int{1, 2, 3}, Other: []int{1, 2, 3}, Stats: broadcast.Stats{Published: 3}},
		},
		{
			name: "nil Options in New, Watch and WatchWithPrefix are ignored",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t, nil, broadcast.WithQueueLength(2), nil)
				w := hWatch(t, b, nil, nil)
				p, err := b.WatchWithPrefix([]int{-1}, nil)
				r.Errs = append(r.Errs, hostileErr(err))
				hPub(t, b, 1, 2, 3)
				hShutdown(t, b)
				r.Values, r.Other = hC(t, w), hC(t, p)
				r.Dropped = []uint64{w.Dropped(), p.Dropped()}
			},
			want: hostileResult{Errs: []string{"nil"}, Values: []int{1, 2}, Other: []int{-1, 1, 2}, Dropped: []uint64{1, 1}},
		},
		{
			name: "repeated options: the last one wins",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, broadcast.WithQueueLength(1), broadcast.WithPolicy(broadcast.Block),
					broadcast.WithQueueLength(3), broadcast.WithPolicy(broadcast.DropOldest))
				hPub(t, b, 1, 2, 3, 4, 5) // would wait forever under Block
				hShutdown(t, b)
				r.Values = hC(t, w)
				r.Dropped = []uint64{w.Dropped()}
			},
			want: hostileResult{Values: []int{3, 4, 5}, Dropped: []uint64{2}},
		},
	}
	return cases
}

// Contexts: nil is an error (never a panic), a done ctx publishes nothing, a
// ctx that ends while Shutdown waits makes it give up.
func hostileContextCases() []hostileCase {
	canceled := func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	expired := func() context.Context {
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		cancel() // releases the timer; ctx.Err() stays DeadlineExceeded
		return ctx
	}
	publishCtx := func(name string, ctx func() context.Context, closed bool, want string) hostileCase {
		return hostileCase{
			name: name,
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, hBlock(10)...)
				if closed {
					hShutdown(t, b)
				}
				var c context.Context
				if ctx != nil {
					c = ctx()
				}
				r.Errs = append(r.Errs, hostileErr(b.PublishContext(c, 1)))
				if !closed {
					hPub(t, b, 2)
					hShutdown(t, b)
				}
				r.Values = hC(t, w)
				r.Stats = b.Stats()
			},
			want: hostileResult{Errs: []string{want}, Values: map[bool][]int{false: {2}, true: nil}[closed],
				Stats: broadcast.Stats{Published: map[bool]uint64{false: 1, true: 0}[closed]}},
		}
	}
	return []hostileCase{
		publishCtx("PublishContext(nil ctx)", nil, false, "broadcast error"),
		publishCtx("PublishContext(canceled ctx)", canceled, false, "Canceled"),
		publishCtx("PublishContext(ctx past its deadline)", expired, false, "DeadlineExceeded"),
		// A done ctx is reported before the shut-down broadcaster.
		publishCtx("PublishContext(canceled ctx) after Shutdown", canceled, true, "Canceled"),
		publishCtx("PublishContext(nil ctx) after Shutdown", nil, true, "broadcast error"),
		{
			name: "Shutdown(nil ctx) does nothing",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b)
				//lint:ignore SA1012 testing the nil check
				r.Errs = append(r.Errs, hostileErr(b.Shutdown(nil))) //nolint:staticcheck
				r.Errs = append(r.Errs, hostileErr(b.Publish(1)))
				hShutdown(t, b)
				r.Values = hC(t, w)
				r.Stats = b.Stats()
			},
			want: hostileResult{Errs: []string{"broadcast error", "nil"}, Values: []int{1}, Stats: broadcast.Stats{Published: 1}},
		},
		{
			// Nothing to wait for: it completes, and the done ctx does not
			// matter (it returns nil, not ctx.Err()).
			name: "Shutdown(canceled ctx) with no Publish waiting",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, hBlock(1)...)
				hPub(t, b, 1)
				err := b.Shutdown(canceled())
				r.Errs = append(r.Errs, hostileErr(err), hostileErr(b.Publish(2)))
				r.Values = hAll(t, w)
				r.Stats = b.Stats()
			},
			want: hostileResult{Errs: []string{"nil", "ErrClosed"}, Values: []int{1}, Stats: broadcast.Stats{Published: 1}},
		},
		{
			// Nobody reads a C() watcher holding 200 values: Shutdown
			// returns nil at once, and the channel keeps all 200
			// (guarantee 6; issue 27: it used to keep ChannelBuffer-1 and
			// drop the rest at the deadline).
			name: "Shutdown with a deadline, C() watcher holding 200 values, nobody reading",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, broadcast.WithQueueLength(200))
				w.C()
				hPub(t, b, testutil.Seq(0, 200)...)
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				start := time.Now()
				r.Errs = append(r.Errs, hostileErr(b.Shutdown(ctx)))
				r.Elapsed = time.Since(start)
				r.Values = hC(t, w)
				r.Dropped = []uint64{w.Dropped()}
				r.Stats = b.Stats()
			},
			want: hostileResult{Errs: []string{"nil"}, Values: testutil.Seq(0, 200), Dropped: []uint64{0},
				Stats: broadcast.Stats{Published: 200}},
		},
		hostileShutdownExpired("All"),
		hostileShutdownExpired("C"),
		{
			name: "Shutdown(canceled ctx) while the first Shutdown waits returns at once",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, hBlock(1)...)
				hPub(t, b, 1)
				pub := hAsync(func() error { return b.Publish(2) })
				synctest.Wait()
				first := hAsync(func() error { return b.Shutdown(context.Background()) })
				synctest.Wait()
				start := time.Now()
				r.Errs = append(r.Errs, hostileErr(b.Shutdown(canceled())))
				r.Elapsed = time.Since(start)
				r.Values = hC(t, w) // makes room: the first Shutdown can finish
				r.Errs = append(r.Errs, hostileErr(<-first), hostileErr(<-pub))
				r.Stats = b.Stats()
			},
			want: hostileResult{Errs: []string{"Canceled", "nil", "nil"}, Values: []int{1, 2}, Stats: broadcast.Stats{Published: 2}},
		},
		{
			name: "Shutdown three times, the last with a canceled ctx",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				for _, ctx := range []context.Context{context.Background(), context.Background(), canceled()} {
					r.Errs = append(r.Errs, hostileErr(b.Shutdown(ctx)))
				}
			},
			want: hostileResult{Errs: []string{"nil", "nil", "nil"}},
		},
	}
}

// hostileShutdownExpired: Shutdown with a ctx already past its deadline
// while a Publish waits for a full Block watcher read through path: it
// returns at once; the Publish gives up with ErrClosed, its value goes to
// the watcher with room and is counted as dropped for the full one.
// The same on both read paths: the full watcher keeps 1 (guarantee 6).
func hostileShutdownExpired(path string) hostileCase {
	held := []int{1}
	kept := []int{1}      // readable after Shutdown
	last := len(held) + 1 // the value whose Publish waits
	dropped := uint64(last - len(kept))
	return hostileCase{
		name: "Shutdown(ctx past its deadline) while a Publish waits, " + path,
		run: func(t *testing.T, r *hostileResult) {
			b := hNew(t)
			full := hWatch(t, b, hBlock(1)...)
			roomy := hWatch(t, b, broadcast.WithQueueLength(10))
			if path == "C" {
				full.C()
			}
			for _, v := range held {
				hPub(t, b, v)
			}
			pub := hAsync(func() error { return b.Publish(last) })
			synctest.Wait()
			ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			defer cancel()
			start := time.Now()
			r.Errs = append(r.Errs, hostileErr(b.Shutdown(ctx)))
			r.Elapsed = time.Since(start)
			r.Errs = append(r.Errs, hostileErr(<-pub))
			r.Values, r.Other = hC(t, full), hC(t, roomy)
			r.Dropped = []uint64{full.Dropped(), roomy.Dropped()}
			r.Stats = b.Stats()
		},
		want: hostileResult{
			Errs:    []string{"DeadlineExceeded", "ErrClosed"},
			Values:  kept,
			Other:   testutil.Seq(1, last+1),
			Dropped: []uint64{dropped, 0},
			// Published counts the value although its Publish returned
			// ErrClosed: it was committed, and reached roomy.
			Stats: broadcast.Stats{Published: uint64(last), Dropped: dropped},
		},
	}
}

func hostilePrefixCases() []hostileCase {
	const big = 100_000
	bigPrefix := func() []int {
		p := make([]int, big)
		for i := range p {
			p[i] = -big + i
		}
		return p
	}
	// summary describes vs as "<n> prefix values in order" plus the rest.
	summary := func(vs []int) []string {
		n := 0
		for n < len(vs) && vs[n] == -big+n {
			n++
		}
		return []string{fmt.Sprintf("%d prefix values in order", n), fmt.Sprint(vs[n:])}
	}
	var cases []hostileCase
	for _, prefix := range []struct {
		name string
		p    []int
	}{{"nil", nil}, {"empty", []int{}}} {
		cases = append(cases, hostileCase{
			name: "WatchWithPrefix(" + prefix.name + " prefix) is Watch",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w, err := b.WatchWithPrefix(prefix.p, broadcast.WithQueueLength(1))
				r.Errs = append(r.Errs, hostileErr(err))
				hPub(t, b, 1, 2)
				hShutdown(t, b)
				r.Values = hAll(t, w)
				r.Dropped = []uint64{w.Dropped()}
			},
			want: hostileResult{Errs: []string{"nil"}, Values: []int{1}, Dropped: []uint64{1}},
		})
	}
	for _, pc := range []struct {
		name  string
		p     broadcast.Policy
		want  string
		wantC string // through C(): while its prefix is unread, DropOldest drops the new value (Watcher.C)
	}{{"Drop", broadcast.Drop, "[1]", "[1]"}, {"DropOldest", broadcast.DropOldest, "[3]", "[1]"}, {"Block", broadcast.Block, "[1]", "[1]"}} {
		for _, path := range []string{"All", "C"} {
			cases = append(cases, hostileCase{
				// The prefix is never dropped, however long: the watcher
				// holds it plus its queue length.
				name: fmt.Sprintf("WatchWithPrefix(%d values), %s queue 1, read through %s", big, pc.name, path),
				run: func(t *testing.T, r *hostileResult) {
					b := hNew(t)
					w, err := b.WatchWithPrefix(bigPrefix(), broadcast.WithPolicy(pc.p), broadcast.WithQueueLength(1))
					r.Errs = append(r.Errs, hostileErr(err))
					if path == "C" {
						w.C()
					}
					for v := 1; v <= 3; v++ {
						ok, err := b.TryPublish(v) // Block: only the first fits
						r.Ok = append(r.Ok, ok)
						r.Errs = append(r.Errs, hostileErr(err))
					}
					hShutdown(t, b) // nothing reads meanwhile (guarantee 6)
					var vs []int
					if path == "C" {
						vs = hC(t, w)
					} else {
						vs = hAll(t, w)
					}
					r.Strings = summary(vs)
					r.Dropped = []uint64{w.Dropped()}
				},
				want: hostileResult{
					Errs:    []string{"nil", "nil", "nil", "nil"},
					Ok:      []bool{true, pc.p != broadcast.Block, pc.p != broadcast.Block},
					Strings: []string{fmt.Sprintf("%d prefix values in order", big), map[string]string{"All": pc.want, "C": pc.wantC}[path]},
					Dropped: []uint64{map[bool]uint64{true: 0, false: 2}[pc.p == broadcast.Block]},
				},
			})
		}
	}
	cases = append(cases,
		hostileCase{
			name: "WatchWithPrefix copies the prefix",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				prefix := []int{-2, -1}
				w, err := b.WatchWithPrefix(prefix)
				r.Errs = append(r.Errs, hostileErr(err))
				prefix[0], prefix[1] = 100, 200
				hPub(t, b, 1)
				hShutdown(t, b)
				r.Values = hAll(t, w)
			},
			want: hostileResult{Errs: []string{"nil"}, Values: []int{-2, -1, 1}},
		},
		hostileCase{
			name: "WatchWithPrefix after Shutdown",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				hShutdown(t, b)
				w, err := b.WatchWithPrefix([]int{1})
				r.Errs = append(r.Errs, hostileErr(err))
				r.Strings = append(r.Strings, fmt.Sprint(w == nil))
			},
			want: hostileResult{Errs: []string{"ErrClosed"}, Strings: []string{"true"}},
		},
	)
	return cases
}

// A shut-down broadcaster: every entry point answers, none panics.
func hostileClosedCases() []hostileCase {
	return []hostileCase{
		{
			name: "every entry point after Shutdown",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				hPub(t, b, 1)
				hShutdown(t, b)
				ok, err := b.TryPublish(3)
				w, werr := b.Watch()
				r.Errs = append(r.Errs, hostileErr(b.Publish(1)), hostileErr(b.PublishContext(context.Background(), 2)),
					hostileErr(err), hostileErr(werr), hostileErr(b.Shutdown(context.Background())))
				r.Ok = append(r.Ok, ok)
				r.Strings = append(r.Strings, fmt.Sprint(w == nil))
				r.Stats = b.Stats()
			},
			want: hostileResult{Errs: []string{"ErrClosed", "ErrClosed", "ErrClosed", "ErrClosed", "nil"}, Ok: []bool{false},
				Strings: []string{"true"}, Stats: broadcast.Stats{Published: 1}},
		},
		{
			// Stop after Shutdown discards what a watcher in ring mode held
			// (uncounted, as any Stop does) ...
			name: "Stop after Shutdown, C() never called: queued values discarded",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, broadcast.WithQueueLength(2))
				hPub(t, b, 1, 2, 3)
				hShutdown(t, b)
				w.Stop()
				w.Stop()
				r.Values, r.Other = hAll(t, w), hC(t, w)
				r.Dropped = []uint64{w.Dropped()}
				r.Stats = b.Stats()
			},
			want: hostileResult{Dropped: []uint64{1}, Stats: broadcast.Stats{Published: 3, Dropped: 1}},
		},
		{
			// ... on both read paths: C()'s channel held the queue, 1 and
			// 2 (3 to 5 dropped), and Stop discards them too. Nobody
			// reads, and Shutdown returns nil at once (guarantee 6).
			name: "Stop after Shutdown, C() called before: discarded as through All",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, broadcast.WithQueueLength(2))
				w.C()
				for v := 1; v <= 5; v++ {
					hPub(t, b, v)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				start := time.Now()
				r.Errs = append(r.Errs, hostileErr(b.Shutdown(ctx)))
				r.Elapsed = time.Since(start)
				w.Stop()
				r.Values = hC(t, w)
				r.Dropped = []uint64{w.Dropped()}
				r.Stats = b.Stats()
			},
			want: hostileResult{Errs: []string{"nil"},
				Dropped: []uint64{3}, Stats: broadcast.Stats{Published: 5, Dropped: 3}},
		},
	}
}

func hostileStopCases() []hostileCase {
	cases := []hostileCase{
		{
			name: "Stop twice, then Dropped and Stats",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, broadcast.WithQueueLength(1))
				hPub(t, b, 1, 2, 3)
				w.Stop()
				w.Stop()
				hPub(t, b, 4, 5)
				r.Dropped = []uint64{w.Dropped()}
				r.Values = hAll(t, w)
				r.Other = hC(t, w)
				r.Stats = b.Stats()
			},
			want: hostileResult{Dropped: []uint64{2}, Stats: broadcast.Stats{Published: 5, Dropped: 2}},
		},
	}
	for _, path := range []string{"All", "C"} {
		cases = append(cases,
			hostileCase{
				// Two goroutines stop a full Block watcher while a Publish
				// waits for it: both return, the Publish goes on with nil,
				// the value is not counted as dropped for the stopped watcher.
				// On both paths Stop discards what the watcher held.
				name: "Stop from two goroutines while a Publish waits for it, " + path,
				run: func(t *testing.T, r *hostileResult) {
					b := hNew(t)
					qlen, held := 1, 1
					w := hWatch(t, b, hBlock(qlen)...)
					other := hWatch(t, b, broadcast.WithQueueLength(10))
					if path == "C" {
						w.C()
					}
					for v := 1; v <= held; v++ {
						hPub(t, b, v)
					}
					pub := hAsync(func() error { return b.Publish(held + 1) })
					synctest.Wait()
					if _, ok := hReturned(pub); ok {
						t.Fatalf("Publish(%d) did not wait for the full Block watcher", held+1)
					}
					var wg sync.WaitGroup
					wg.Go(w.Stop)
					wg.Go(w.Stop)
					wg.Wait()
					r.Errs = append(r.Errs, hostileErr(<-pub))
					hPub(t, b, held+2)
					hShutdown(t, b)
					if path == "C" {
						r.Values = hC(t, w) // closed and empty
					} else {
						r.Values = hAll(t, w)
					}
					r.Other = hC(t, other)
					r.Dropped = []uint64{w.Dropped()}
					r.Stats = b.Stats()
				},
				want: hostileResult{Errs: []string{"nil"}, Values: nil,
					Other:   testutil.Seq(1, 4),
					Dropped: []uint64{0}, Stats: broadcast.Stats{Published: 3}},
			},
			hostileCase{
				// Stop from another goroutine while the reader is inside
				// its loop body and a Publish waits: the Publish goes on;
				// the loop ends when its body returns, yielding nothing more.
				// On both paths Stop discards 2, which the watcher held.
				name: "Stop from another goroutine mid-delivery, " + path,
				run: func(t *testing.T, r *hostileResult) {
					b := hNew(t)
					qlen, fill := 1, []int{2} // fill: what the watcher holds besides 1
					w := hWatch(t, b, hBlock(qlen)...)
					if path == "C" {
						w.C()
					}
					hPub(t, b, 1)
					inBody, release := make(chan struct{}), make(chan struct{})
					read := make(chan []int, 1)
					go func() {
						var got []int
						hLoop(path, w, func(v int) bool {
							got = append(got, v)
							if v == 1 {
								close(inBody)
								<-release
							}
							return true
						})
						read <- got
					}()
					<-inBody
					for _, v := range fill { // the watcher has room for these
						hPub(t, b, v)
					}
					last := len(fill) + 2
					pub := hAsync(func() error { return b.Publish(last) })
					synctest.Wait()
					if _, ok := hReturned(pub); ok {
						t.Fatalf("Publish(%d) did not wait for the full Block watcher", last)
					}
					w.Stop()
					r.Errs = append(r.Errs, hostileErr(<-pub))
					close(release)
					r.Values = <-read
					r.Dropped = []uint64{w.Dropped()}
					r.Stats = b.Stats()
				},
				want: hostileResult{Errs: []string{"nil"}, Values: []int{1},
					Dropped: []uint64{0}, Stats: broadcast.Stats{Published: 3}},
			},
		)
	}
	return cases
}

func hostileReadCases() []hostileCase {
	return []hostileCase{
		{
			name: "C() after breaking out of All()",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, broadcast.WithPolicy(broadcast.DropOldest), broadcast.WithQueueLength(3))
				hPub(t, b, 1, 2, 3)
				for v := range w.All() {
					r.Values = append(r.Values, v)
					break
				}
				hPub(t, b, 4, 5) // 5 pushes 2 out
				hShutdown(t, b)
				r.Other = hC(t, w)
				r.Dropped = []uint64{w.Dropped()}
			},
			want: hostileResult{Values: []int{1}, Other: []int{3, 4, 5}, Dropped: []uint64{1}},
		},
		{
			name: "All() twice in a row, the first broken out of",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b)
				hPub(t, b, 1, 2, 3)
				for v := range w.All() {
					r.Values = append(r.Values, v)
					if v == 2 {
						break
					}
				}
				hPub(t, b, 4)
				hShutdown(t, b)
				r.Other = hAll(t, w)
			},
			want: hostileResult{Values: []int{1, 2}, Other: []int{3, 4}},
		},
		{
			name: "two All() loops at once share the values",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, hBlock(3)...)
				var res [2]chan []int
				for i := range res {
					res[i] = make(chan []int, 1)
					go func() {
						var got []int
						for v := range w.All() {
							got = append(got, v)
						}
						res[i] <- got
					}()
				}
				hPub(t, b, testutil.Seq(0, 100)...)
				hShutdown(t, b)
				a, c := <-res[0], <-res[1]
				r.Strings = []string{fmt.Sprint(slices.IsSorted(a)), fmt.Sprint(slices.IsSorted(c))}
				r.Values = slices.Sorted(slices.Values(append(a, c...)))
			},
			want: hostileResult{Strings: []string{"true", "true"}, Values: testutil.Seq(0, 100)},
		},
		{
			name: "C() and All() of a watcher stopped before any read",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b)
				hPub(t, b, 1)
				w.Stop()
				r.Values, r.Other = hAll(t, w), hC(t, w)
				r.Stats = b.Stats()
			},
			want: hostileResult{Stats: broadcast.Stats{Published: 1}},
		},
	}
}

// hostileReentrantCases: calls into the broadcaster from the goroutine that
// reads a watcher, inside its All() loop or its range over C().
func hostileReentrantCases(path string) []hostileCase {
	in := " from inside the " + path + " loop"
	// room is how many values a Block watcher of queue length 1 takes
	// while its reader is inside the loop body with the first: 1 in its
	// queue, on both read paths (guarantee 3).
	const room = 1
	return []hostileCase{
		{
			name: "Publish and Shutdown" + in,
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, broadcast.WithQueueLength(10))
				hPub(t, b, 1)
				hLoop(path, w, func(v int) bool {
					r.Values = append(r.Values, v)
					if v < 5 {
						r.Errs = append(r.Errs, hostileErr(b.Publish(v+1)))
					} else {
						r.Errs = append(r.Errs, hostileErr(b.Shutdown(context.Background())))
					}
					return true
				})
				r.Stats = b.Stats()
			},
			want: hostileResult{Values: []int{1, 2, 3, 4, 5}, Errs: []string{"nil", "nil", "nil", "nil", "nil"}, Stats: broadcast.Stats{Published: 5}},
		},
		{
			// The reader of a full Block watcher cannot make room while it
			// publishes: TryPublish says so.
			name: "TryPublish" + in + " of a Block watcher",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, hBlock(1)...)
				hPub(t, b, 1)
				hLoop(path, w, func(v int) bool {
					r.Values = append(r.Values, v)
					switch v {
					case 1:
						for x := 2; x <= room+2; x++ { // 2 .. room+1 fit in the room left, room+2 does not
							ok, err := b.TryPublish(x)
							r.Ok = append(r.Ok, ok)
							r.Errs = append(r.Errs, hostileErr(err))
							synctest.Wait()
						}
					case room + 1:
						r.Errs = append(r.Errs, hostileErr(b.Shutdown(context.Background())))
					}
					return true
				})
				r.Stats = b.Stats()
			},
			want: hostileResult{
				Values: testutil.Seq(1, room+2),
				Ok:     append(slices.Repeat([]bool{true}, room), false),
				Errs:   slices.Repeat([]string{"nil"}, room+2),
				Stats:  broadcast.Stats{Published: uint64(room + 1)},
			},
		},
		{
			// The same with a wait: PublishContext returns at its deadline,
			// the value goes to the other watcher and is counted as dropped
			// for the full one. (Publish, which has no deadline, would wait
			// forever: the reader it waits for is itself.)
			name: "PublishContext with a deadline" + in + " of a Block watcher",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, hBlock(1)...)
				other := hWatch(t, b, broadcast.WithQueueLength(10))
				hPub(t, b, 1)
				hLoop(path, w, func(v int) bool {
					r.Values = append(r.Values, v)
					switch v {
					case 1:
						for x := 2; x <= room+2; x++ {
							ctx, cancel := context.WithTimeout(context.Background(), time.Second)
							start := time.Now()
							r.Errs = append(r.Errs, hostileErr(b.PublishContext(ctx, x)))
							r.Elapsed += time.Since(start)
							cancel()
							synctest.Wait()
						}
					case room + 1:
						r.Errs = append(r.Errs, hostileErr(b.Shutdown(context.Background())))
					}
					return true
				})
				r.Other = hC(t, other)
				r.Dropped = []uint64{w.Dropped(), other.Dropped()}
				r.Stats = b.Stats()
			},
			want: hostileResult{
				Values:  testutil.Seq(1, room+2),
				Other:   testutil.Seq(1, room+3),
				Errs:    append(append(slices.Repeat([]string{"nil"}, room), "DeadlineExceeded"), "nil"),
				Elapsed: time.Second, Dropped: []uint64{1, 0},
				Stats: broadcast.Stats{Published: uint64(room + 2), Dropped: 1},
			},
		},
		{
			name: "Watch, Stats and Stop" + in,
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b)
				hPub(t, b, 1, 2, 3)
				var late *broadcast.Watcher[int]
				hLoop(path, w, func(v int) bool {
					r.Values = append(r.Values, v)
					switch v {
					case 1:
						late = hWatch(t, b)
						hPub(t, b, 4)
						st := b.Stats()
						r.Strings = append(r.Strings, fmt.Sprintf("%+v", st))
					case 2:
						w.Stop()
						r.Strings = append(r.Strings, fmt.Sprintf("%+v", b.Stats()))
						hPub(t, b, 5)
					}
					return true
				})
				hShutdown(t, b)
				r.Other = hC(t, late)
				r.Stats = b.Stats()
			},
			want: hostileResult{
				// The loop ends at once after Stop, on both paths.
				Values:  []int{1, 2},
				Other:   []int{4, 5},
				Strings: []string{"{Published:4 Dropped:0 Watchers:2}", "{Published:4 Dropped:0 Watchers:1}"},
				Stats:   broadcast.Stats{Published: 5},
			},
		},
		{
			// Shutdown from the reader of a full Block watcher while a
			// Publish waits for it cannot complete the delivery: it returns
			// at its deadline, the Publish gives up, and the reader then
			// reads what was queued before its loop ends, on both read
			// paths (guarantee 6: Shutdown waits for no reader).
			name: "Shutdown with a deadline" + in + " while a Publish waits for that watcher",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, hBlock(1)...)
				hPub(t, b, 1)
				var pubs []<-chan error
				hLoop(path, w, func(v int) bool {
					r.Values = append(r.Values, v)
					if v != 1 {
						return true
					}
					for x := 2; x <= room+2; x++ { // 2 .. room+1 fit, room+2 waits for room
						pubs = append(pubs, hAsync(func() error { return b.Publish(x) }))
						synctest.Wait()
					}
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					start := time.Now()
					r.Errs = append(r.Errs, hostileErr(b.Shutdown(ctx)))
					r.Elapsed = time.Since(start)
					return true
				})
				for _, p := range pubs {
					r.Errs = append(r.Errs, hostileErr(<-p))
				}
				r.Dropped = []uint64{w.Dropped()}
				r.Stats = b.Stats()
			},
			want: hostileResult{
				Values:  []int{1, 2},
				Errs:    append(append([]string{"DeadlineExceeded"}, slices.Repeat([]string{"nil"}, room)...), "ErrClosed"),
				Elapsed: 2 * time.Second,
				Dropped: []uint64{1},
				Stats:   broadcast.Stats{Published: uint64(room + 2), Dropped: 1},
			},
		},
	}
}
