package broadcast_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/internal/testutil"
)

// TestContextOptionMisuse: WithContext(nil) and WithContext given to New
// panic with a "broadcast:" message.
func TestContextOptionMisuse(t *testing.T) {
	var nilCtx context.Context // the misuse under test
	for name, f := range map[string]func(){
		"WithContext(nil)":     func() { broadcast.WithContext(nilCtx) },
		"New(WithContext(..))": func() { broadcast.New[int](broadcast.WithContext(context.Background())) },
	} {
		msg, panicked := testutil.PanicMessage(f)
		if !panicked || !strings.HasPrefix(msg, "broadcast:") {
			t.Errorf("%s: panicked %v with %q, want a \"broadcast:\" panic", name, panicked, msg)
		}
	}
}

// TestOptions: New's options are the defaults (queue length 1000, Drop),
// Watch's override them one by one, and nil Options are ignored.
func TestOptions(t *testing.T) {
	cases := []struct {
		name    string
		newOpts []broadcast.Option
		opts    []broadcast.Option
		n       int
		want    []int
	}{
		{"defaults", nil, nil, 1001, testutil.Seq(0, 1000)},
		{"nil everywhere", []broadcast.Option{nil}, []broadcast.Option{nil, nil}, 1001, testutil.Seq(0, 1000)},
		{"New sets the default", []broadcast.Option{broadcast.WithQueueLength(2), broadcast.WithPolicy(broadcast.DropOldest)}, nil, 5, []int{3, 4}},
		{"Watch overrides the policy", []broadcast.Option{broadcast.WithQueueLength(2), broadcast.WithPolicy(broadcast.DropOldest)}, []broadcast.Option{broadcast.WithPolicy(broadcast.Drop)}, 5, []int{0, 1}},
		{"Watch overrides the length", []broadcast.Option{broadcast.WithQueueLength(2), broadcast.WithPolicy(broadcast.DropOldest)}, []broadcast.Option{broadcast.WithQueueLength(3)}, 5, []int{2, 3, 4}},
		{"nil among options", []broadcast.Option{nil, broadcast.WithQueueLength(2), nil}, []broadcast.Option{nil, broadcast.WithPolicy(broadcast.DropOldest), nil}, 5, []int{3, 4}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newB(t, tc.newOpts...)
			w := watch(t, b, tc.opts...)
			p, err := b.WatchWithPrefix([]int{-1}, tc.opts...)
			if err != nil {
				t.Fatalf("WatchWithPrefix: %v", err)
			}
			publish(t, b, testutil.Seq(0, tc.n)...)
			shutdown(t, b)
			if d := diff(tc.want, testutil.Drain(t, w.C(), guard)); d != "" {
				t.Errorf("Watch (-want +got):\n%s", d)
			}
			if d := diff(append([]int{-1}, tc.want...), testutil.Drain(t, p.C(), guard)); d != "" {
				t.Errorf("WatchWithPrefix (-want +got):\n%s", d)
			}
			checkDropped(t, "w", w, uint64(tc.n-len(tc.want)))
		})
	}
}

// --- Bad input -----------------------------------------------------------

// TestBadOptionsPanic: programmer errors panic with the package prefix, in
// the Option constructor or at the latest where the Option is used.
func TestBadOptionsPanic(t *testing.T) {
	cases := []struct {
		name string
		opt  func() broadcast.Option
	}{
		{"WithQueueLength(0)", func() broadcast.Option { return broadcast.WithQueueLength(0) }},
		{"WithQueueLength(-1)", func() broadcast.Option { return broadcast.WithQueueLength(-1) }},
		{"WithQueueLength(MaxQueueLength+1)", func() broadcast.Option { return broadcast.WithQueueLength(broadcast.MaxQueueLength + 1) }},
		{"BlockFor(0)", func() broadcast.Option { return broadcast.WithPolicy(broadcast.BlockFor(0)) }},
		{"BlockFor(-1s)", func() broadcast.Option { return broadcast.WithPolicy(broadcast.BlockFor(-time.Second)) }},
		{"WithPolicy(Policy{})", func() broadcast.Option { return broadcast.WithPolicy(broadcast.Policy{}) }},
	}
	for _, tc := range cases {
		for _, where := range []string{"New", "Watch", "WatchWithPrefix"} {
			t.Run(tc.name+"/"+where, func(t *testing.T) {
				b := newB(t)
				msg, ok := testutil.PanicMessage(func() {
					switch where {
					case "New":
						nb := broadcast.New[int](tc.opt())
						defer nb.Shutdown(context.Background())
					case "Watch":
						b.Watch(tc.opt())
					case "WatchWithPrefix":
						b.WatchWithPrefix([]int{1}, tc.opt())
					}
				})
				if !ok {
					t.Fatal("no panic")
				}
				if !strings.HasPrefix(msg, "broadcast:") {
					t.Errorf("panic %q, want it to start with %q", msg, "broadcast:")
				}
				checkStats(t, b, broadcast.Stats{})
			})
		}
	}

	t.Run("limits accepted", func(t *testing.T) {
		b := newB(t, broadcast.WithQueueLength(broadcast.MaxQueueLength))
		w := watch(t, b, broadcast.WithQueueLength(1), broadcast.WithPolicy(broadcast.BlockFor(time.Nanosecond)))
		publish(t, b, 1)
		w.Stop()
	})
}

// TestEvictPolicyString: Evict is a valid policy with a name.
func TestEvictPolicyString(t *testing.T) {
	if got := broadcast.Evict.String(); got != "Evict" {
		t.Errorf("Evict.String() = %q", got)
	}
}

// TestHistoryOptionMisuse: WithHistory given to a Watch method, or n < 0,
// panics with a "broadcast:" message.
func TestHistoryOptionMisuse(t *testing.T) {
	b := newB(t)
	for name, f := range map[string]func(){
		"WithHistory(-1)":           func() { broadcast.WithHistory(-1) },
		"Watch(WithHistory(1))":     func() { b.Watch(broadcast.WithHistory(1)) },
		"WatchFrom(WithHistory(1))": func() { b.WatchFrom(0, broadcast.WithHistory(1)) },
	} {
		msg, panicked := testutil.PanicMessage(f)
		if !panicked || !strings.HasPrefix(msg, "broadcast:") {
			t.Errorf("%s: panicked %v with %q, want a \"broadcast:\" panic", name, panicked, msg)
		}
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

// TestHostileConfig: configuration mistakes panic with the package prefix.
func TestHostileConfig(t *testing.T) { runHostile(t, hostileConfigCases()) }

// TestWatcherPolicy: a watcher reports the policy it runs under (its own,
// the broadcaster's default, or Drop), and Waits tells the waiting ones.
func TestWatcherPolicy(t *testing.T) {
	for _, tc := range []struct {
		name       string
		new, watch []broadcast.Option
		want       broadcast.Policy
		waits      bool
	}{
		{"default", nil, nil, broadcast.Drop, false},
		{"broadcaster's", []broadcast.Option{broadcast.WithPolicy(broadcast.Block)}, nil, broadcast.Block, true},
		{"watcher's over broadcaster's", []broadcast.Option{broadcast.WithPolicy(broadcast.Block)}, []broadcast.Option{broadcast.WithPolicy(broadcast.DropOldest)}, broadcast.DropOldest, false},
		{"BlockFor", nil, []broadcast.Option{broadcast.WithPolicy(broadcast.BlockFor(time.Second))}, broadcast.BlockFor(time.Second), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := broadcast.New[int](tc.new...)
			defer b.Shutdown(context.Background())
			w, err := b.Watch(tc.watch...)
			if err != nil {
				t.Fatal(err)
			}
			if got := w.Policy(); got != tc.want || got.Waits() != tc.waits {
				t.Errorf("Policy() = %v (Waits %v), want %v (Waits %v)", got, got.Waits(), tc.want, tc.waits)
			}
		})
	}
}
