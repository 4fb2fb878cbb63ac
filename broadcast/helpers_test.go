package broadcast_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/internal/testutil"
)

// Readers that leave without Stop (issue 5). A watcher whose reader is gone
// stays registered (Watcher's doc: "a watcher nobody reads and nobody stops
// holds its queue (and, under Block, makes publishers wait) until the
// broadcaster shuts down"). Per policy, once its reader left:
//
//   - Drop and DropOldest: it holds exactly its queue length (Drop the
//     oldest values, DropOldest the newest), counts every other value in
//     Dropped(), and publishers never wait;
//   - BlockFor(d): each value that finds it full waits d, then is dropped
//     for it (counted);
//   - Block: publishers wait for it. TryPublish says false, PublishContext
//     returns at its deadline, and Shutdown(ctx) returns ctx.Err() at its
//     deadline with every watcher closed and no goroutine left.
//
// A watcher whose reader used C() holds the same: C()'s channel is its
// queue (guarantee 3), and Shutdown waits for no reader (guarantee 6).
//
// Everything timed runs in a testing/synctest bubble, so the durations
// asserted are exact virtual time, not measurements.

// abandonQueue is the abandoned watcher's queue length.
const abandonQueue = 3

// abandonWait is d of BlockFor(d).
const abandonWait = 2 * time.Second

// How a reader leaves. Each reads 1 and 2 of the queued 1, 2, 3 and leaves
// without Stop; 3 must still be queued for the watcher afterwards (All()
// batches values, and a batch not yielded stays queued).
var abandonModes = []struct {
	name string
	viaC bool // the reader used C()
	// leave starts the reader and returns once it has left; rest returns
	// what the reader reads after it is released at the end (only the
	// stuck reader reads on), or nil.
	leave func(t *testing.T, w *broadcast.Watcher[int]) (rest func() []int)
}{
	{"break out of All()", false, func(t *testing.T, w *broadcast.Watcher[int]) func() []int {
		var got []int
		for v := range w.All() {
			if got = append(got, v); len(got) == 2 {
				break
			}
		}
		abandonCheckRead(t, got)
		return nil
	}},
	{"goroutine returns from an All() loop", false, func(t *testing.T, w *broadcast.Watcher[int]) func() []int {
		abandonCheckRead(t, <-abandonGoroutine(func(f func(int) bool) {
			for v := range w.All() {
				if !f(v) {
					return
				}
			}
		}))
		return nil
	}},
	{"goroutine returns from a range over C()", true, func(t *testing.T, w *broadcast.Watcher[int]) func() []int {
		abandonCheckRead(t, <-abandonGoroutine(func(f func(int) bool) {
			for v := range w.C() {
				if !f(v) {
					return
				}
			}
		}))
		return nil
	}},
	{"All() loop body panics, recovered outside the loop", false, func(t *testing.T, w *broadcast.Watcher[int]) func() []int {
		abandonCheckRead(t, <-abandonGoroutine(func(f func(int) bool) {
			defer func() { recover() }()
			for v := range w.All() {
				if !f(v) {
					panic("reader gone")
				}
			}
		}))
		return nil
	}},
	{"C() reader goroutine exits by runtime.Goexit", true, func(t *testing.T, w *broadcast.Watcher[int]) func() []int {
		abandonCheckRead(t, <-abandonGoroutine(func(f func(int) bool) {
			for v := range w.C() {
				if !f(v) {
					runtime.Goexit()
				}
			}
		}))
		return nil
	}},
	{"reader stuck in its All() loop body until the end", false, func(t *testing.T, w *broadcast.Watcher[int]) func() []int {
		release := make(chan struct{})
		read := make(chan []int, 1)
		rest := make(chan []int, 1)
		go func() {
			var got, after []int
			for v := range w.All() {
				if len(got) < 2 {
					got = append(got, v)
					if len(got) == 2 {
						read <- got
						<-release
					}
					continue
				}
				after = append(after, v)
			}
			rest <- after
		}()
		abandonCheckRead(t, <-read)
		return func() []int { close(release); return <-rest }
	}},
}

// abandonGoroutine runs loop in a new goroutine with a callback that takes
// two values and then says stop; the channel gets those values once the
// goroutine has exited, whichever way it left.
func abandonGoroutine(loop func(f func(int) bool)) <-chan []int {
	ch := make(chan []int, 1)
	go func() {
		var got []int
		defer func() { ch <- got }()
		loop(func(v int) bool {
			got = append(got, v)
			return len(got) < 2
		})
	}()
	return ch
}

func abandonCheckRead(t *testing.T, got []int) {
	t.Helper()
	if d := cmp.Diff([]int{1, 2}, got); d != "" {
		t.Fatalf("the reader read (-want +got):\n%s", d)
	}
}

// abandonSetup returns a broadcaster with the abandoned watcher w (policy p,
// queue abandonQueue) and a roomy Drop watcher, after 1, 2, 3 were
// published and w's reader left having read 1 and 2.
func abandonSetup(t *testing.T, p broadcast.Policy, mode int) (b *broadcast.Broadcaster[int], w, other *broadcast.Watcher[int], rest func() []int) {
	t.Helper()
	b = broadcast.New[int]()
	var err error
	if w, err = b.Watch(broadcast.WithPolicy(p), broadcast.WithQueueLength(abandonQueue)); err != nil {
		t.Fatal(err)
	}
	if other, err = b.Watch(broadcast.WithQueueLength(100)); err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= 3; v++ {
		if err := b.Publish(v); err != nil {
			t.Fatal(err)
		}
	}
	rest = abandonModes[mode].leave(t, w)
	synctest.Wait() // the reader is gone (or stuck)
	if got := b.Stats().Watchers; got != 2 {
		t.Fatalf("Stats().Watchers = %d after the reader left, want 2: leaving is not Stop", got)
	}
	return b, w, other, rest
}

// abandonRead returns what w still yields after Shutdown: through the stuck
// reader if there is one, else through C() (which must be closed after the
// values) or All() (which must end).
func abandonRead(t *testing.T, w *broadcast.Watcher[int], rest func() []int, viaAll bool) []int {
	t.Helper()
	if rest != nil {
		return rest()
	}
	if viaAll {
		return testutil.CollectSeq(t, w.All(), -1, time.Minute)
	}
	return testutil.Drain(t, w.C(), time.Minute)
}

// Black-box tests of the contract in the package doc (doc.go): one test per
// guarantee (TestRegistrationBarrier ... TestNoGoroutineAfterShutdown), then
// the semantics the package documents beyond it, then bad input.
//
// Nothing here sleeps and hopes. Concurrency is synchronised with channels and
// WaitGroups; anything timed (BlockFor, PublishContext and Shutdown deadlines)
// runs inside a testing/synctest bubble, where time is virtual and
// synctest.Wait tells that a Publish really is waiting.

// guard bounds every wait that could hang on a bug. It is never a timing
// assertion: inside a bubble it fires as soon as everything is stuck.
const guard = 10 * time.Second

var policyCases = []struct {
	name string
	p    broadcast.Policy
}{
	{"Drop", broadcast.Drop},
	{"DropOldest", broadcast.DropOldest},
	{"Block", broadcast.Block},
	{"BlockFor", broadcast.BlockFor(time.Hour)},
}

// readPath is one of the two ways to read a watcher.
type readPath struct {
	name string
	// take reads n values, or every value until the watcher ends if n < 0.
	take func(t testing.TB, w *broadcast.Watcher[int], n int) []int
	// loop is the plain range loop a user writes: it calls f for each value
	// until the watcher ends or f returns false. It does not use t, so it
	// may run in any goroutine.
	loop func(w *broadcast.Watcher[int], f func(int) bool)
}

var readPaths = []readPath{
	{
		name: "C",
		take: func(t testing.TB, w *broadcast.Watcher[int], n int) []int {
			t.Helper()
			return testutil.Collect(t, w.C(), n, guard)
		},
		loop: func(w *broadcast.Watcher[int], f func(int) bool) {
			for v := range w.C() {
				if !f(v) {
					break
				}
			}
		},
	},
	{
		name: "All",
		take: func(t testing.TB, w *broadcast.Watcher[int], n int) []int {
			t.Helper()
			return testutil.CollectSeq(t, w.All(), n, guard)
		},
		loop: func(w *broadcast.Watcher[int], f func(int) bool) {
			for v := range w.All() {
				if !f(v) {
					break
				}
			}
		},
	},
}

func diff(want, got any) string { return cmp.Diff(want, got, cmpopts.EquateEmpty()) }

// newB returns a broadcaster that is shut down when the test ends.
func newB(t testing.TB, opts ...broadcast.Option) *broadcast.Broadcaster[int] {
	t.Helper()
	b := broadcast.New[int](opts...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		if err := b.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown at cleanup: %v", err)
		}
	})
	return b
}

func with(p broadcast.Policy, n int) []broadcast.Option {
	return []broadcast.Option{broadcast.WithPolicy(p), broadcast.WithQueueLength(n)}
}

func watch(t testing.TB, b *broadcast.Broadcaster[int], opts ...broadcast.Option) *broadcast.Watcher[int] {
	t.Helper()
	w, err := b.Watch(opts...)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	return w
}

func publish(t testing.TB, b *broadcast.Broadcaster[int], vs ...int) {
	t.Helper()
	for _, v := range vs {
		if err := b.Publish(v); err != nil {
			t.Fatalf("Publish(%d): %v", v, err)
		}
	}
}

func shutdown(t testing.TB, b *broadcast.Broadcaster[int]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// shutdownThenRead shuts b down, with nothing reading while it runs
// (guarantee 6: Shutdown waits for no reader), then reads w to its end
// through rp and returns what it took.
func shutdownThenRead(t testing.TB, b *broadcast.Broadcaster[int], w *broadcast.Watcher[int], rp readPath) []int {
	t.Helper()
	shutdown(t, b)
	return rp.take(t, w, -1)
}

func checkStats(t testing.TB, b *broadcast.Broadcaster[int], want broadcast.Stats) {
	t.Helper()
	if d := cmp.Diff(want, b.Stats()); d != "" {
		t.Errorf("Stats() mismatch (-want +got):\n%s", d)
	}
	if got := b.Dropped(); got != want.Dropped {
		t.Errorf("Dropped() = %d, want %d, as Stats().Dropped", got, want.Dropped)
	}
}

func checkDropped(t testing.TB, name string, w *broadcast.Watcher[int], want uint64) {
	t.Helper()
	if got := w.Dropped(); got != want {
		t.Errorf("%s.Dropped() = %d, want %d", name, got, want)
	}
}

// async runs f in a new goroutine; the channel receives its result.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// reader reads w through rp in a new goroutine until the watcher ends (or n
// values if n > 0); the channel receives what it read.
func reader(w *broadcast.Watcher[int], rp readPath, n int) <-chan []int {
	ch := make(chan []int, 1)
	go func() {
		var vs []int
		rp.loop(w, func(v int) bool {
			vs = append(vs, v)
			return n <= 0 || len(vs) < n
		})
		ch <- vs
	}()
	return ch
}

// returned reports whether ch already holds a result, without waiting.
// Inside a bubble, call it after synctest.Wait.
func returned(ch <-chan error) (err error, ok bool) {
	select {
	case err := <-ch:
		return err, true
	default:
		return nil, false
	}
}

// publishNoWait publishes each value and fails if a Publish waits (bubble only).
func publishNoWait(t testing.TB, b *broadcast.Broadcaster[int], vs ...int) {
	t.Helper()
	for _, v := range vs {
		ch := async(func() error { return b.Publish(v) })
		synctest.Wait()
		err, ok := returned(ch)
		if !ok {
			t.Fatalf("Publish(%d) is waiting; want it to return at once", v)
		}
		if err != nil {
			t.Fatalf("Publish(%d): %v", v, err)
		}
	}
}

// publishTimed publishes v and returns how long Publish took (bubble only,
// so the duration is exact virtual time).
func publishTimed(t testing.TB, b *broadcast.Broadcaster[int], v int) time.Duration {
	t.Helper()
	start := time.Now()
	if err := b.Publish(v); err != nil {
		t.Fatalf("Publish(%d): %v", v, err)
	}
	return time.Since(start)
}

// isClosedNow reports whether ch is closed with nothing left in it (bubble
// only, after synctest.Wait: nothing is on its way).
func isClosedNow(ch <-chan int) (closed bool, extra []int) {
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				return true, extra
			}
			extra = append(extra, v)
		default:
			return false, extra
		}
	}
}

// Hostile and odd input (issue 5): every exported entry point of package
// broadcast with out-of-range, nil, canceled, huge, repeated or reentrant
// arguments and calls. Each case states its outcome in the table (a
// hostileResult compared with cmp.Diff): an error, a value, a count, or a
// panic whose message starts with "broadcast:" for configuration mistakes.
//
// Every case runs in a testing/synctest bubble: a case that deadlocks fails
// (synctest reports the bubble's deadlock) instead of hanging, elapsed times
// are exact virtual time, and a goroutine a case leaves behind fails it.

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

// runHostile runs hostile cases: misuse and adversarial sequences, each
// with the exact outcome it must have (in a synctest bubble).
func runHostile(t *testing.T, cases []hostileCase) {
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

func pendingShutdown(t *testing.T, b *broadcast.Broadcaster[int]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
