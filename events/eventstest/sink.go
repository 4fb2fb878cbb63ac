package eventstest

import (
	"context"
	"strconv"
	"sync"

	"github.com/heraldgo/herald/events"
)

// Op names a [events.Sink] method.
type Op string

// The operations of a sink.
const (
	OpCreate Op = "Create"
	OpPatch  Op = "Patch"
)

// Call is one call a [FakeSink] received.
type Call struct {
	Op    Op
	Event events.Event // the event given (for Patch, old), copied
	Patch events.Patch // for OpPatch
	Err   error        // what the call returned
}

// FakeSink is an in-memory [events.Sink] with failure injection, for tests.
// It stores created events by namespace and name, applies patches to them,
// and gives each stored version a new ResourceVersion ("1", "2", …). It
// returns [events.ErrAlreadyExists] from Create for a name it has and
// [events.ErrNotFound] from Patch for one it has not. The zero value is ready
// to use; it is safe for concurrent use.
type FakeSink struct {
	// Hook, if not nil, runs at the start of every call, before any
	// injected failure and without FakeSink's lock held; a non-nil result is
	// returned as the call's error. It may block, to play a slow store,
	// honoring ctx or not. Set it before the sink is used.
	Hook func(ctx context.Context, op Op, e *events.Event) error

	mu      sync.Mutex
	stored  map[sinkKey]*events.Event
	order   []sinkKey
	calls   []Call
	fails   []failure
	rv      int
	changed chan struct{} // closed and replaced at every call
}

type sinkKey struct{ namespace, name string }

type failure struct {
	op  Op // "" matches both
	n   int
	err error
}

var _ events.Sink = (*FakeSink)(nil)

// NewFakeSink returns an empty FakeSink.
func NewFakeSink() *FakeSink { return &FakeSink{} }

// FailNext makes the next n calls of op return err (op "" means either
// operation). Failures queue up in the order given.
func (s *FakeSink) FailNext(op Op, n int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > 0 {
		s.fails = append(s.fails, failure{op, n, err})
	}
}

// Create implements [events.Sink].
func (s *FakeSink) Create(ctx context.Context, e *events.Event) (*events.Event, error) {
	if err := s.hook(ctx, OpCreate, e); err != nil {
		return nil, s.logCall(Call{Op: OpCreate, Event: *e.Clone(), Err: err})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := Call{Op: OpCreate, Event: *e.Clone()}
	if err := s.injectedLocked(OpCreate); err != nil {
		c.Err = err
		return nil, s.logCallLocked(c)
	}
	k := sinkKey{e.Namespace, e.Name}
	if _, ok := s.stored[k]; ok {
		c.Err = events.ErrAlreadyExists
		return nil, s.logCallLocked(c)
	}
	if s.stored == nil {
		s.stored = make(map[sinkKey]*events.Event)
	}
	st := e.Clone()
	s.rv++
	st.ResourceVersion = strconv.Itoa(s.rv)
	s.stored[k] = st
	s.order = append(s.order, k)
	s.logCallLocked(c)
	return st.Clone(), nil
}

// Patch implements [events.Sink].
func (s *FakeSink) Patch(ctx context.Context, old *events.Event, p events.Patch) (*events.Event, error) {
	if err := s.hook(ctx, OpPatch, old); err != nil {
		return nil, s.logCall(Call{Op: OpPatch, Event: *old.Clone(), Patch: p, Err: err})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := Call{Op: OpPatch, Event: *old.Clone(), Patch: p}
	if err := s.injectedLocked(OpPatch); err != nil {
		c.Err = err
		return nil, s.logCallLocked(c)
	}
	st, ok := s.stored[sinkKey{old.Namespace, old.Name}]
	if !ok {
		c.Err = events.ErrNotFound
		return nil, s.logCallLocked(c)
	}
	st.Count, st.LastTimestamp, st.Message = p.Count, p.LastTimestamp, p.Message
	s.rv++
	st.ResourceVersion = strconv.Itoa(s.rv)
	s.logCallLocked(c)
	return st.Clone(), nil
}

func (s *FakeSink) hook(ctx context.Context, op Op, e *events.Event) error {
	if s.Hook == nil {
		return nil
	}
	return s.Hook(ctx, op, e)
}

func (s *FakeSink) injectedLocked(op Op) error {
	for i := range s.fails {
		f := &s.fails[i]
		if f.op != "" && f.op != op {
			continue
		}
		err := f.err
		if f.n--; f.n == 0 {
			s.fails = append(s.fails[:i], s.fails[i+1:]...)
		}
		return err
	}
	return nil
}

func (s *FakeSink) logCall(c Call) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logCallLocked(c)
}

func (s *FakeSink) logCallLocked(c Call) error {
	s.calls = append(s.calls, c)
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return c.Err
}

// Delete removes a stored event, so that the next Patch of it fails with
// [events.ErrNotFound]. It reports whether the event was stored.
func (s *FakeSink) Delete(namespace, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := sinkKey{namespace, name}
	if _, ok := s.stored[k]; !ok {
		return false
	}
	delete(s.stored, k)
	for i, o := range s.order {
		if o == k {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
	return true
}

// Events returns copies of the stored events, in the order they were
// created.
func (s *FakeSink) Events() []events.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]events.Event, 0, len(s.order))
	for _, k := range s.order {
		out = append(out, *s.stored[k].Clone())
	}
	return out
}

// Event returns a copy of the stored event namespace/name.
func (s *FakeSink) Event(namespace, name string) (events.Event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.stored[sinkKey{namespace, name}]
	if !ok {
		return events.Event{}, false
	}
	return *e.Clone(), true
}

// Calls returns every call received so far, failed ones included, in order.
func (s *FakeSink) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Call, len(s.calls))
	for i, c := range s.calls {
		c.Event = *c.Event.Clone()
		out[i] = c
	}
	return out
}

// CallCount returns the number of calls of op received so far ("" counts
// both operations).
func (s *FakeSink) CallCount(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if op == "" || c.Op == op {
			n++
		}
	}
	return n
}

// WaitCalls waits until the sink has received at least n calls, or ctx
// ends, and returns ctx.Err() in that case.
func (s *FakeSink) WaitCalls(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		if len(s.calls) >= n {
			s.mu.Unlock()
			return nil
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
