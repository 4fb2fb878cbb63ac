package broadcast_test

// The soak test (issue 5, "Reliability"): many watchers with mixed policies,
// queue lengths, read paths and behaviours join and leave while several
// publishers publish through all three entry points, and every value is
// accounted for.
//
// By default it runs a short form sized for `make test` under -race; with
// HERALD_SOAK=1 it runs the long form (`make soak`): 10 million values, 1000
// watchers. HERALD_SOAK_SEED picks the random configuration (the schedule
// itself is up to the Go scheduler).
//
// How the checks are exact although everything runs at once:
//
//   - Values are (publisher, seq). A reference Block watcher, registered
//     before anything is published and never stopped, defines the one total
//     order: pos(v) is v's position in what it received. It must receive
//     every published value, each publisher's in seq order.
//   - Every other watcher's values must appear at strictly increasing
//     positions (guarantee 2), each publisher's seqs increasing; a Block
//     watcher's must be consecutive positions (guarantee 4: no gap).
//   - The barrier (guarantee 1) is observed from outside: each publisher
//     stores seq in started[p] before calling Publish and in done[p] after it
//     returned nil. Before Watch the joiner reads done[] (lower: those values'
//     Publish returned before Watch was called, so they must not arrive);
//     after Watch returns it reads started[] (upper: every later seq was
//     published by a call made after Watch returned, so it must arrive or be
//     counted). In positions: the watcher's start S lies in [lo, hi], lo the
//     position after the last lower value, hi the position of the first value
//     after upper. Values in flight during Watch may or may not arrive, so
//     every fourth join is quiet: it registers while no Publish is in flight
//     (publishers hold a read lock around each Publish), lo == hi, and its
//     start is exact, so a barrier off by a single value fails the soak.
//   - A watcher alive until Shutdown (graceful, so everything is delivered or
//     counted) must account for every value from its start: S = total -
//     received - Dropped() must lie in [lo, hi], received values at or after
//     S. Block: Dropped() == 0 and the received values are exactly positions
//     S..total-1. DropOldest: the last value is always received. A watcher
//     that never read until Shutdown (Drop, DropOldest) holds exactly
//     min(queue length, total-S) values: positions S.. under Drop, ..total-1
//     under DropOldest (guarantee 3), on both read paths; through C(), a
//     DropOldest watcher whose prefix is still unread in its channel drops
//     the new value instead (Watcher.C), so it holds positions S.. as Drop.
//   - A stopped watcher: Stop discards unread values without counting them,
//     so only bounds hold: every value up to the last one it received was
//     received or counted (received + Dropped() >= last+1-hi), and nothing
//     published after Stop returned was counted (received + Dropped() <=
//     Published after Stop - lo). A never-read watcher yields nothing after
//     Stop, on both read paths.
//   - Stats().Published == nil-error Publish/PublishContext + true
//     TryPublish == what the reference received; Stats().Dropped == the sum
//     of every watcher's Dropped(), stopped ones included.
//   - HeapAlloc after the soak (broadcaster still reachable, everything else
//     dropped) is within soakHeapSlack of before; goleak (TestMain) checks
//     that no goroutine remains.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgo/herald/broadcast"
)

// soakVal is a value of the soak: publisher P's S-th value, or (P ==
// soakPrefixP) the S-th value of a watcher's prefix.
type soakVal struct{ P, S uint32 }

const soakPrefixP = math.MaxUint32

// soakHeapSlack bounds how much more heap may be in use after the soak than
// before it, with the broadcaster still reachable: its ring, bookkeeping,
// and the test framework's own buffers. A leak per value (10^7 of them in
// the long form) or of more than 2 KB per watcher (10^3) is beyond it. The
// long form measures 0.7 MiB today, most of it watchers the broadcaster
// still references after Shutdown (TestPendingParkedWatcherRetained);
// tighten this once that is fixed.
const soakHeapSlack = 2 << 20

type soakConfig struct {
	name          string
	publishers    int
	values        int // in total, split evenly between the publishers
	watchers      int // joined over the run, besides the reference
	live          int // churning watchers alive at once, roughly
	survivorEvery int // every survivorEvery-th watcher is never stopped
}

var (
	soakShort = soakConfig{name: "short", publishers: 3, values: 30_000, watchers: 50, live: 8, survivorEvery: 6}
	soakLong  = soakConfig{name: "long", publishers: 4, values: 10_000_000, watchers: 1000, live: 40, survivorEvery: 12}
)

func TestSoak(t *testing.T) {
	cfg := soakShort
	if os.Getenv("HERALD_SOAK") == "1" {
		cfg = soakLong
	}
	seed := uint64(5)
	if s := os.Getenv("HERALD_SOAK_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("HERALD_SOAK_SEED=%q: %v", s, err)
		}
		seed = n
	}
	t.Logf("soak %s: %d publishers, %d values, %d watchers, seed %d (HERALD_SOAK_SEED)", cfg.name, cfg.publishers, cfg.values, cfg.watchers, seed)

	before := heapAfterGC()
	b, peak := runSoak(t, cfg, seed) // everything but b is unreachable when it returns
	after := heapAfterGC()
	runtime.KeepAlive(b)
	t.Logf("heap: %s before, %s peak, %s after (broadcaster still reachable)", mib(before), mib(peak), mib(after))
	if after > before+soakHeapSlack {
		t.Errorf("heap after the soak %s, before %s: grew by more than %s", mib(after), mib(before), mib(soakHeapSlack))
	}
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

type soakRead uint8

const (
	soakReadAll   soakRead = iota // range over All()
	soakReadC                     // range over C()
	soakReadMixed                 // a few All() loops broken out of, then C()
	soakReadNever                 // stalled: read only after Shutdown (or Stop)
)

var soakReadNames = [...]string{"All", "C", "All+C", "never"}

type soakSpec struct {
	policy    string
	p         broadcast.Policy
	qlen      int // 0: the broadcaster's default (DefaultQueueLength), no option given
	read      soakRead
	chanMode  bool // stalled: C() called at once (channel mode), never read
	slowEvery int  // > 0: the reader sleeps after every slowEvery values
	prefix    int  // -1: Watch; otherwise WatchWithPrefix with this many values
	nilPrefix bool // prefix 0 passed as nil rather than empty
	survivor  bool // never stopped
	quiet     bool // registered while no Publish is in flight
	stopAfter int64
	external  bool          // Stop called from another goroutine while the reader reads
	stallFor  time.Duration // stalled, not a survivor: Stop after this long
}

func (sp soakSpec) queueLen() int {
	if sp.qlen == 0 {
		return broadcast.DefaultQueueLength
	}
	return sp.qlen
}

func (sp soakSpec) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%v q=%d read=%s", sp.p, sp.queueLen(), soakReadNames[sp.read])
	if sp.chanMode {
		sb.WriteString(" C()-called")
	}
	if sp.slowEvery > 0 {
		fmt.Fprintf(&sb, " slow/%d", sp.slowEvery)
	}
	if sp.prefix >= 0 {
		fmt.Fprintf(&sb, " prefix=%d", sp.prefix)
	}
	if sp.quiet {
		sb.WriteString(" quiet")
	}
	if sp.survivor {
		sb.WriteString(" survivor")
	} else if sp.read == soakReadNever {
		fmt.Fprintf(&sb, " stall=%v", sp.stallFor)
	} else {
		fmt.Fprintf(&sb, " stopAfter=%d external=%v", sp.stopAfter, sp.external)
	}
	return sb.String()
}

type soakWatcher struct {
	id     int
	spec   soakSpec
	w      *broadcast.Watcher[soakVal]
	block  bool
	lower  []int64 // per publisher: seqs <= lower were published before Watch was called
	upper  []int64 // per publisher: seqs > upper were published after Watch returned
	rng    *rand.Rand
	stopRq chan struct{} // external stop requested by the reader

	// Owned by whoever reads the watcher (its reader goroutine, or the test
	// goroutine draining a stalled watcher after Shutdown).
	seen       int64 // values read, prefix included
	prefixRead int
	received   int64 // non-prefix values
	firstPos   int64
	lastPos    int64
	gaps       int64 // received values not adjacent in the total order
	unresolved []soakVal
	lastSeq    []int64
	stopIssued bool

	stopped       atomic.Bool
	pubBeforeStop uint64
	pubAfterStop  uint64
}

type soak struct {
	t      *testing.T
	cfg    soakConfig
	seed   uint64
	b      *broadcast.Broadcaster[soakVal]
	perPub []int

	// pos[p][s] is 1 + the position of (p, s) in the reference order, 0
	// until the reference reader has received it.
	pos     [][]atomic.Uint32
	refDone chan struct{}
	refN    int64
	waits   atomic.Int64 // how often a reader had to wait for the reference

	started, done []atomic.Int64
	published     atomic.Int64 // nil-error publishes + true TryPublishes
	nPublish      atomic.Int64
	nPublishCtx   atomic.Int64
	nTryTrue      atomic.Int64
	nTryFalse     atomic.Int64

	// gate is held for reading by each publisher from started[p] to done[p],
	// and for writing by a quiet join: no Publish is in flight while it
	// calls Watch, so lower == upper and its start is exact.
	gate sync.RWMutex

	stopMu sync.RWMutex // held for reading by Stop calls; for writing when they end
	ending bool
	endCh  chan struct{}

	readers sync.WaitGroup
	nFails  atomic.Int32
}

func (s *soak) fail(format string, args ...any) {
	if n := s.nFails.Add(1); n <= 20 {
		s.t.Errorf(format, args...)
	} else if n == 21 {
		s.t.Errorf("more failures; not shown")
	}
}

func runSoak(t *testing.T, cfg soakConfig, seed uint64) (*broadcast.Broadcaster[soakVal], uint64) {
	s := &soak{
		t: t, cfg: cfg, seed: seed,
		b:       broadcast.New[soakVal](),
		refDone: make(chan struct{}),
		endCh:   make(chan struct{}),
		started: make([]atomic.Int64, cfg.publishers),
		done:    make([]atomic.Int64, cfg.publishers),
		pos:     make([][]atomic.Uint32, cfg.publishers),
	}
	for p := range cfg.publishers {
		n := cfg.values / cfg.publishers
		if p < cfg.values%cfg.publishers {
			n++
		}
		s.perPub = append(s.perPub, n)
		s.pos[p] = make([]atomic.Uint32, n)
		s.started[p].Store(-1)
		s.done[p].Store(-1)
	}

	// Peak heap, sampled (ReadMemStats stops the world briefly).
	var peak atomic.Uint64
	monStop := make(chan struct{})
	var mon sync.WaitGroup
	mon.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-tick.C:
			case <-monStop:
				return
			}
		}
	})

	ref, err := s.b.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(1<<16))
	if err != nil {
		t.Fatalf("Watch (reference): %v", err)
	}
	s.readers.Go(func() { s.readReference(ref) })

	start := time.Now()
	var pubs sync.WaitGroup
	for p := range cfg.publishers {
		pubs.Go(func() { s.publisher(p) })
	}
	pubsDone := make(chan struct{})
	go func() { pubs.Wait(); close(pubsDone) }()

	// Join watchers throughout: watcher i when i/watchers of the values are out.
	rng := rand.New(rand.NewPCG(seed, 0))
	var ws []*soakWatcher
	for i := range cfg.watchers {
		target := int64(i) * int64(cfg.values) / int64(cfg.watchers)
	wait:
		for s.published.Load() < target {
			select {
			case <-pubsDone:
				break wait
			default:
				time.Sleep(20 * time.Microsecond)
			}
		}
		ws = append(ws, s.join(i, s.newSpec(i, rng)))
	}
	<-pubsDone
	elapsed := time.Since(start)

	// No Stop from here on: what is not stopped now is alive at Shutdown.
	s.stopMu.Lock()
	s.ending = true
	close(s.endCh)
	s.stopMu.Unlock()
	alive := 0
	for _, sw := range ws {
		if !sw.stopped.Load() {
			alive++
		}
	}
	if got, want := s.b.Stats().Watchers, 1+alive; got != want {
		s.fail("Stats().Watchers = %d before Shutdown, want %d (the reference and %d alive)", got, want, alive)
	}

	// The stalled watchers are read from now on, publishing being over:
	// Shutdown waits for C() readers to take what does not fit in their
	// channels, so they must read while it runs.
	var drains []chan struct{}
	for _, sw := range ws {
		if sw.spec.read == soakReadNever {
			drains = append(drains, s.drain(sw))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := s.b.Shutdown(ctx); err != nil {
		s.fail("Shutdown = %v, want nil (graceful: every reader reads)", err)
	}
	s.readers.Wait()
	for _, done := range drains {
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatalf("reading a stalled watcher after Shutdown did not end")
		}
	}
	close(monStop)
	mon.Wait()

	s.verify(ref, ws)
	s.report(ws, alive, elapsed, peak.Load())
	b := s.b
	return b, peak.Load()
}

func (s *soak) newSpec(i int, r *rand.Rand) soakSpec {
	sp := soakSpec{survivor: i%s.cfg.survivorEvery == 0, prefix: -1, quiet: i%4 == 1}
	switch x := r.IntN(100); {
	case x < 30:
		sp.policy, sp.p = "Drop", broadcast.Drop
	case x < 55:
		sp.policy, sp.p = "DropOldest", broadcast.DropOldest
	case x < 80:
		sp.policy, sp.p = "Block", broadcast.Block
	default:
		d := []time.Duration{20 * time.Microsecond, 200 * time.Microsecond, 2 * time.Millisecond}[r.IntN(3)]
		sp.policy, sp.p = "BlockFor", broadcast.BlockFor(d)
	}
	waits := sp.policy == "Block" || sp.policy == "BlockFor"
	qlens := []int{1, 2, 3, 16, 64, 0, 1024, 1025, 4096}
	sp.qlen = qlens[r.IntN(len(qlens))]
	switch x := r.IntN(100); {
	case x < 20 && !(waits && sp.survivor):
		// A stalled Block or BlockFor watcher holds every publisher up until
		// it is stopped, so it cannot be a survivor.
		sp.read = soakReadNever
		sp.chanMode = r.IntN(2) == 0
	case x < 40:
		sp.slowEvery = 256 + r.IntN(1024)
		fallthrough
	default:
		sp.read = []soakRead{soakReadAll, soakReadAll, soakReadC, soakReadC, soakReadMixed}[r.IntN(5)]
	}
	if waits && sp.survivor && sp.qlen != 0 && sp.qlen < 16 {
		sp.qlen = 64 // not a lock-step hand-off for the whole run
	}
	switch x := r.IntN(100); {
	case x < 60:
	case x < 65:
		sp.prefix, sp.nilPrefix = 0, true
	case x < 70:
		sp.prefix = 0
	default:
		sp.prefix = 1 + r.IntN(50)
	}
	if !sp.survivor {
		life := int64(s.cfg.live) * int64(s.cfg.values) / int64(s.cfg.watchers)
		sp.stopAfter = r.Int64N(2*life + 1)
		sp.external = r.IntN(2) == 0
		if sp.read == soakReadNever {
			if waits {
				sp.stallFor = time.Duration(r.Int64N(int64(2 * time.Millisecond)))
			} else {
				sp.stallFor = time.Duration(r.Int64N(int64(20 * time.Millisecond)))
			}
		}
	}
	return sp
}

func (s *soak) join(i int, sp soakSpec) *soakWatcher {
	sw := &soakWatcher{
		id: i, spec: sp, block: sp.policy == "Block",
		lower: make([]int64, s.cfg.publishers), upper: make([]int64, s.cfg.publishers),
		lastSeq: make([]int64, s.cfg.publishers), firstPos: -1, lastPos: -1,
		rng:    rand.New(rand.NewPCG(s.seed, uint64(i)+1000)),
		stopRq: make(chan struct{}),
	}
	for p := range sw.lastSeq {
		sw.lastSeq[p] = -1
	}
	var opts []broadcast.Option
	if sp.qlen != 0 {
		opts = append(opts, broadcast.WithQueueLength(sp.qlen))
	}
	if sp.policy != "Drop" || i%2 == 0 { // Drop is the default: sometimes say so
		opts = append(opts, broadcast.WithPolicy(sp.p))
	}
	if sp.quiet {
		s.gate.Lock()
	}
	for p := range sw.lower {
		sw.lower[p] = s.done[p].Load()
	}
	var err error
	if sp.prefix < 0 {
		sw.w, err = s.b.Watch(opts...)
	} else {
		var prefix []soakVal
		if !sp.nilPrefix {
			prefix = make([]soakVal, sp.prefix)
		}
		for k := range prefix {
			prefix[k] = soakVal{P: soakPrefixP, S: uint32(k)}
		}
		sw.w, err = s.b.WatchWithPrefix(prefix, opts...)
		clear(prefix) // WatchWithPrefix copies the prefix
	}
	if err != nil {
		s.t.Fatalf("watcher %d: Watch: %v", i, err)
	}
	for p := range sw.upper {
		sw.upper[p] = s.started[p].Load()
	}
	if sp.quiet {
		s.gate.Unlock()
	}

	switch {
	case sp.read == soakReadNever:
		if sp.chanMode {
			sw.w.C()
		}
		if !sp.survivor {
			s.readers.Go(func() {
				tm := time.NewTimer(sp.stallFor)
				defer tm.Stop()
				select {
				case <-tm.C:
					s.stop(sw)
				case <-s.endCh:
				}
			})
		}
	default:
		if !sp.survivor && sp.external {
			s.readers.Go(func() {
				select {
				case <-sw.stopRq:
					s.stop(sw)
				case <-s.endCh:
				}
			})
		}
		s.readers.Go(func() { s.read(sw) })
	}
	return sw
}

// stop stops sw unless the soak is ending (then sw counts as alive at
// Shutdown). At most one goroutine stops a given watcher.
func (s *soak) stop(sw *soakWatcher) {
	s.stopMu.RLock()
	defer s.stopMu.RUnlock()
	if s.ending {
		return
	}
	sw.pubBeforeStop = s.b.Stats().Published
	sw.w.Stop()
	sw.pubAfterStop = s.b.Stats().Published
	sw.stopped.Store(true)
}

func (s *soak) publisher(p int) {
	r := rand.New(rand.NewPCG(s.seed, uint64(p)+1))
	ctx, cancel := context.WithCancel(context.Background()) // never canceled during the soak
	defer cancel()
	for seq := range s.perPub[p] {
		v := soakVal{P: uint32(p), S: uint32(seq)}
		s.gate.RLock()
		s.started[p].Store(int64(seq))
		var err error
		switch r.IntN(3) {
		case 0:
			if err = s.b.Publish(v); err == nil {
				s.nPublish.Add(1)
			}
		case 1:
			if err = s.b.PublishContext(ctx, v); err == nil {
				s.nPublishCtx.Add(1)
			}
		default:
			ok := false
			for range 4 {
				if ok, err = s.b.TryPublish(v); ok || err != nil {
					break
				}
				s.nTryFalse.Add(1)
				runtime.Gosched()
			}
			switch {
			case ok:
				s.nTryTrue.Add(1)
			case err == nil:
				if err = s.b.Publish(v); err == nil {
					s.nPublish.Add(1)
				}
			}
		}
		if err != nil {
			s.gate.RUnlock()
			s.fail("publisher %d: value %d: %v", p, seq, err)
			return
		}
		s.done[p].Store(int64(seq))
		s.published.Add(1)
		s.gate.RUnlock()
	}
}

func (s *soak) readReference(ref *broadcast.Watcher[soakVal]) {
	defer close(s.refDone)
	next := make([]uint32, s.cfg.publishers)
	var n int64
	for v := range ref.All() {
		if int(v.P) >= len(next) || v.S != next[v.P] || int(v.S) >= s.perPub[v.P] {
			s.fail("reference watcher: got %v after %d values, want publisher %d's values in order %v", v, n, v.P, next)
			continue
		}
		next[v.P]++
		s.pos[v.P][v.S].Store(uint32(n + 1))
		n++
	}
	s.refN = n
}

// posOf returns v's position in the reference order, waiting for the
// reference reader if it has not got there yet (it must get there: every
// value a watcher receives was published, and the reference loses nothing).
func (s *soak) posOf(v soakVal) int64 {
	slot := &s.pos[v.P][v.S]
	if p := slot.Load(); p != 0 {
		return int64(p) - 1
	}
	s.waits.Add(1)
	start := time.Now()
	for i := 0; ; i++ {
		if p := slot.Load(); p != 0 {
			return int64(p) - 1
		}
		select {
		case <-s.refDone:
			if p := slot.Load(); p != 0 {
				return int64(p) - 1
			}
			s.fail("value %v was received by a watcher but never by the reference Block watcher", v)
			return -1
		default:
		}
		if i < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
		if i%1024 == 0 && time.Since(start) > 2*time.Minute {
			s.fail("value %v: the reference Block watcher has not received it after 2 minutes", v)
			return -1
		}
	}
}

func (s *soak) read(sw *soakWatcher) {
	defer s.resolve(sw, true)
	sp := sw.spec
	if !sp.survivor && sp.stopAfter == 0 {
		s.requestStop(sw) // Stop right after Watch, before any read
	}
	onValue := func(v soakVal) {
		s.check(sw, v)
		if sp.slowEvery > 0 && sw.seen%int64(sp.slowEvery) == 0 {
			time.Sleep(100 * time.Microsecond)
		}
		if !sp.survivor && sw.seen >= sp.stopAfter {
			s.requestStop(sw)
		}
	}
	switch sp.read {
	case soakReadAll:
		for v := range sw.w.All() {
			onValue(v)
		}
	case soakReadC:
		for v := range sw.w.C() {
			onValue(v)
		}
	case soakReadMixed:
		for range 3 {
			k := 1 + sw.rng.IntN(1000)
			broke := false
			for v := range sw.w.All() {
				onValue(v)
				if k--; k == 0 {
					broke = true
					break
				}
			}
			if !broke {
				return // All() ended: so has the watcher
			}
		}
		for v := range sw.w.C() {
			onValue(v)
		}
	}
}

func (s *soak) requestStop(sw *soakWatcher) {
	if sw.stopIssued {
		return
	}
	sw.stopIssued = true
	if sw.spec.external {
		close(sw.stopRq) // another goroutine stops sw while we read on
	} else {
		s.stop(sw) // from inside the reading loop
	}
}

// drain starts reading a stalled watcher once publishing is over (after its
// Stop if it was stopped); the channel is closed when the reading ended.
func (s *soak) drain(sw *soakWatcher) chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer s.resolve(sw, true)
		if sw.stopped.Load() {
			// All() ends at once after Stop; C() keeps what its buffer holds.
			for v := range sw.w.All() {
				s.fail("watcher %d (%v): All() after Stop yielded %v, want nothing", sw.id, sw.spec, v)
			}
			for v := range sw.w.C() {
				s.check(sw, v)
			}
			return
		}
		if sw.id%2 == 0 {
			for v := range sw.w.All() {
				s.check(sw, v)
			}
		} else {
			for v := range sw.w.C() {
				s.check(sw, v)
			}
		}
	}()
	return done
}

func (s *soak) check(sw *soakWatcher, v soakVal) {
	sw.seen++
	if v.P == soakPrefixP {
		if sw.received > 0 || int(v.S) != sw.prefixRead || sw.prefixRead >= sw.spec.prefix {
			s.fail("watcher %d (%v): prefix value %d after %d prefix and %d live values", sw.id, sw.spec, v.S, sw.prefixRead, sw.received)
			return
		}
		sw.prefixRead++
		return
	}
	if sw.prefixRead != max(sw.spec.prefix, 0) {
		s.fail("watcher %d (%v): live value %v after only %d of %d prefix values", sw.id, sw.spec, v, sw.prefixRead, sw.spec.prefix)
		sw.prefixRead = max(sw.spec.prefix, 0)
	}
	if int(v.P) >= len(s.perPub) || int(v.S) >= s.perPub[v.P] {
		s.fail("watcher %d (%v): got %v, which was never published", sw.id, sw.spec, v)
		return
	}
	if int64(v.S) <= sw.lower[v.P] {
		s.fail("watcher %d (%v): got %v, whose Publish returned before Watch was called (guarantee 1; publisher %d had returned up to %d)", sw.id, sw.spec, v, v.P, sw.lower[v.P])
	}
	if int64(v.S) <= sw.lastSeq[v.P] {
		s.fail("watcher %d (%v): got %v after %d of the same publisher (guarantee 2)", sw.id, sw.spec, v, sw.lastSeq[v.P])
	}
	sw.lastSeq[v.P] = int64(v.S)
	sw.unresolved = append(sw.unresolved, v)
	s.resolve(sw, false)
}

// soakMaxUnresolved is how many received values a reader keeps while the
// reference reader has not got to them yet, before it waits for it.
const soakMaxUnresolved = 4096

// resolve runs the order checks on sw's received values whose position in
// the total order is known, in the order sw received them. With final, it
// first waits for the reference reader to finish, so all are known.
func (s *soak) resolve(sw *soakWatcher, final bool) {
	if final && len(sw.unresolved) > 0 {
		select {
		case <-s.refDone:
		case <-time.After(25 * time.Minute): // make soak's -timeout is 30m
			s.fail("watcher %d (%v): the reference Block watcher did not end within 25 minutes", sw.id, sw.spec)
			return
		}
	}
	i := 0
	for ; i < len(sw.unresolved); i++ {
		v := sw.unresolved[i]
		if s.pos[v.P][v.S].Load() == 0 && len(sw.unresolved)-i < soakMaxUnresolved && !final {
			break
		}
		s.checkPos(sw, v)
	}
	if i > 0 {
		n := copy(sw.unresolved, sw.unresolved[i:])
		sw.unresolved = sw.unresolved[:n]
	}
}

func (s *soak) checkPos(sw *soakWatcher, v soakVal) {
	pos := s.posOf(v)
	if pos < 0 {
		return
	}
	if pos <= sw.lastPos {
		s.fail("watcher %d (%v): got %v at position %d of the total order after position %d (guarantee 2)", sw.id, sw.spec, v, pos, sw.lastPos)
	}
	if sw.lastPos >= 0 && pos != sw.lastPos+1 {
		sw.gaps++
		if sw.block {
			s.fail("watcher %d (%v): Block watcher got position %d after %d: lost %d values (guarantee 4)", sw.id, sw.spec, pos, sw.lastPos, pos-sw.lastPos-1)
		}
	}
	if sw.firstPos < 0 {
		sw.firstPos = pos
	}
	sw.lastPos = pos
	sw.received++
}

// finalPos is pos after the reference has received everything.
func (s *soak) finalPos(p int, seq int64) int64 { return int64(s.pos[p][seq].Load()) - 1 }

// window returns [lo, hi]: the positions between which sw's start must lie
// by the barrier.
func (s *soak) window(sw *soakWatcher) (lo, hi int64) {
	hi = s.refN
	for p := range sw.lower {
		if l := sw.lower[p]; l >= 0 {
			lo = max(lo, s.finalPos(p, l)+1)
		}
		if u := sw.upper[p] + 1; u < int64(s.perPub[p]) {
			hi = min(hi, s.finalPos(p, u))
		}
	}
	return lo, hi
}

func (s *soak) verify(ref *broadcast.Watcher[soakVal], ws []*soakWatcher) {
	total := s.refN
	if want := int64(s.cfg.values); total != want || s.published.Load() != want {
		s.fail("reference watcher received %d values, publishers published %d; want %d", total, s.published.Load(), want)
	}
	if ref.Dropped() != 0 {
		s.fail("reference Block watcher: Dropped() = %d, want 0", ref.Dropped())
	}
	st := s.b.Stats()
	accepted := s.nPublish.Load() + s.nPublishCtx.Load() + s.nTryTrue.Load()
	if st.Published != uint64(accepted) || st.Published != uint64(total) {
		s.fail("Stats().Published = %d; nil-error Publish %d + PublishContext %d + true TryPublish %d = %d; the reference received %d",
			st.Published, s.nPublish.Load(), s.nPublishCtx.Load(), s.nTryTrue.Load(), accepted, total)
	}
	var sumDropped uint64
	for _, sw := range ws {
		sumDropped += sw.w.Dropped()
	}
	if st.Dropped != sumDropped {
		s.fail("Stats().Dropped = %d, want %d, the sum of every watcher's Dropped()", st.Dropped, sumDropped)
	}
	if st.Watchers != 0 {
		s.fail("Stats().Watchers = %d after Shutdown, want 0", st.Watchers)
	}

	for _, sw := range ws {
		s.verifyWatcher(sw, total)
	}
}

func (s *soak) verifyWatcher(sw *soakWatcher, total int64) {
	sp := sw.spec
	R, D := sw.received, int64(sw.w.Dropped())
	lo, hi := s.window(sw)
	name := fmt.Sprintf("watcher %d (%v)", sw.id, sp)
	if sp.quiet && lo != hi {
		s.fail("%s: registered with no Publish in flight, yet the barrier window is [%d, %d] (test harness)", name, lo, hi)
	}
	if sw.block && D != 0 {
		s.fail("%s: Block watcher Dropped() = %d, want 0", name, D)
	}
	if R > 0 && (sw.firstPos < lo || sw.lastPos >= total) {
		s.fail("%s: received positions %d..%d, outside [%d, %d) (guarantee 1)", name, sw.firstPos, sw.lastPos, lo, total)
	}
	// stalled: the guarantee-3 shape, given what was published to it.
	stalled := func(published int64) {
		if sw.block {
			if R > int64(sp.queueLen()) || sw.gaps != 0 {
				s.fail("%s: never read, holds %d values with %d gaps; want at most its queue length in a row", name, R, sw.gaps)
			}
			return
		}
		n := min(int64(sp.queueLen()), published)
		if R != n || sw.gaps != 0 {
			s.fail("%s: never read, holds %d values with %d gaps of %d published to it; want exactly min(queue length, published) = %d in a row (guarantee 3)", name, R, sw.gaps, published, n)
		}
	}
	// behindPrefix: through C(), DropOldest drops the new value while the
	// prefix is unread in the channel (Watcher.C): no newest-value check.
	behindPrefix := sp.chanMode && sp.prefix > 0
	if !sw.stopped.Load() {
		if sw.prefixRead != max(sp.prefix, 0) {
			s.fail("%s: read %d of %d prefix values (guarantee 5)", name, sw.prefixRead, sp.prefix)
		}
		start := total - R - D // where its stream began, by the accounting
		if start < lo || start > hi {
			s.fail("%s: received %d + Dropped() %d = %d of %d published; so it started at position %d, but the barrier says between %d and %d (guarantees 1 and 3: received + Dropped() == published to it)",
				name, R, D, R+D, total, start, lo, hi)
			return
		}
		if R > 0 && sw.firstPos < start {
			s.fail("%s: first value at position %d, before its start %d", name, sw.firstPos, start)
		}
		switch {
		case sw.block && start < total && (sw.firstPos != start || sw.lastPos != total-1):
			s.fail("%s: Block watcher received positions %d..%d, want %d..%d", name, sw.firstPos, sw.lastPos, start, total-1)
		case sp.policy == "DropOldest" && !behindPrefix && start < total && sw.lastPos != total-1:
			s.fail("%s: DropOldest watcher's last value at position %d, want the newest, %d", name, sw.lastPos, total-1)
		}
		if sp.read == soakReadNever {
			stalled(total - start)
			if R > 0 && (sp.policy == "Drop" || sp.policy == "DropOldest" && behindPrefix) && sw.firstPos != start {
				s.fail("%s: never-read Drop watcher holds from position %d, want the first ones, from %d (guarantee 3)", name, sw.firstPos, start)
			}
			if R > 0 && sp.policy == "DropOldest" && !behindPrefix && sw.lastPos != total-1 {
				s.fail("%s: never-read DropOldest watcher holds up to position %d, want the last ones, up to %d (guarantee 3)", name, sw.lastPos, total-1)
			}
		}
		return
	}

	// Stopped: Stop discards unread values uncounted, so bounds only.
	if R+D > int64(sw.pubAfterStop)-lo {
		s.fail("%s: stopped; received %d + Dropped() %d = %d, more than the %d published to it at most (from position %d to Stop)",
			name, R, D, R+D, int64(sw.pubAfterStop)-lo, lo)
	}
	if R > 0 && R+D < sw.lastPos+1-hi {
		s.fail("%s: stopped; received %d + Dropped() %d = %d, but up to its last value at position %d at least %d were published to it (from position %d): values lost uncounted",
			name, R, D, R+D, sw.lastPos, sw.lastPos+1-hi, hi)
	}
	if sp.read == soakReadNever {
		if R != 0 {
			s.fail("%s: stopped before any read; yielded %d values after Stop, want none (Stop discards them, on both read paths)", name, R)
		}
	}
}

func (s *soak) report(ws []*soakWatcher, alive int, elapsed time.Duration, peak uint64) {
	type agg struct {
		joined, stopped, stalled, slow, c, all, mixed, prefix int
		dropped                                               uint64
	}
	per := map[string]*agg{}
	order := []string{"Drop", "DropOldest", "Block", "BlockFor"}
	for _, p := range order {
		per[p] = &agg{}
	}
	for _, sw := range ws {
		a := per[sw.spec.policy]
		a.joined++
		if sw.stopped.Load() {
			a.stopped++
		}
		switch sw.spec.read {
		case soakReadNever:
			a.stalled++
		case soakReadC:
			a.c++
		case soakReadAll:
			a.all++
		case soakReadMixed:
			a.mixed++
		}
		if sw.spec.slowEvery > 0 {
			a.slow++
		}
		if sw.spec.prefix >= 0 {
			a.prefix++
		}
		a.dropped += sw.w.Dropped()
	}
	st := s.b.Stats()
	s.t.Logf("soak %s: %d values in %v: %.0f values/s; %d publishers: Publish %d, PublishContext %d, TryPublish %d true (+%d false, retried)",
		s.cfg.name, s.refN, elapsed.Round(time.Millisecond), float64(s.refN)/elapsed.Seconds(), s.cfg.publishers,
		s.nPublish.Load(), s.nPublishCtx.Load(), s.nTryTrue.Load(), s.nTryFalse.Load())
	stopped := 0
	for _, p := range order {
		a := per[p]
		stopped += a.stopped
		s.t.Logf("  %-10s joined %4d (All %d, C %d, All+C %d, never read %d; slow %d; with prefix %d), stopped %4d, dropped %d",
			p, a.joined, a.all, a.c, a.mixed, a.stalled, a.slow, a.prefix, a.stopped, a.dropped)
	}
	s.t.Logf("  watchers: %d joined (+1 reference), %d stopped, %d alive at Shutdown; Stats: Published %d, Dropped %d; peak heap %s; readers waited for the reference %d times",
		len(ws), stopped, alive, st.Published, st.Dropped, mib(peak), s.waits.Load())
}
