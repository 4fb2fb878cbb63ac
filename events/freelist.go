package events

import (
	"sync"
	"sync/atomic"
)

// freeList hands the recorded events that a sink worker is done with, and
// did not hand out (skipped by the spam filter, or replaced by an
// aggregate), back to the Recorders, which reuse them instead of
// allocating (see recycle and get).
//
// It is not a sync.Pool: the worker and the Recorders run on different
// processors, and a sync.Pool passed each event from one processor's pool
// to the other's, which cost more than the allocation it saved (its Get
// and Put took 160 ns per event between them in the pipeline's profile).
// A worker gathers freeBatch events of its own, without synchronization,
// and hands over the whole batch; a Recorder takes events from the
// batch it holds, under a mutex that the worker takes once per batch.
//
// It keeps at most (maxFreeBatches+1)×freeBatch events (35 kB); a
// worker's batch beyond that goes to the garbage collector.
type freeList struct {
	avail atomic.Int32 // events in take and full; read without mu

	mu    sync.Mutex
	take  []*recorded   // Recorders take from its end
	full  [][]*recorded // batches handed over, not yet taken from
	empty [][]*recorded // emptied batches, for workers to fill again
}

const (
	freeBatch      = 32
	maxFreeBatches = 2
)

// get returns a recorded event to reuse, or nil. Its fields hold an old
// event's values: the caller overwrites all of them.
func (f *freeList) get() *recorded {
	if f.avail.Load() == 0 {
		return nil
	}
	f.mu.Lock()
	if len(f.take) == 0 {
		n := len(f.full)
		if n == 0 {
			f.mu.Unlock()
			return nil
		}
		if cap(f.take) > 0 {
			f.empty = append(f.empty, f.take)
		}
		f.take, f.full[n-1] = f.full[n-1], nil
		f.full = f.full[:n-1]
	}
	n := len(f.take)
	r := f.take[n-1]
	f.take[n-1] = nil
	f.take = f.take[:n-1]
	f.avail.Add(-1)
	f.mu.Unlock()
	return r
}

// put hands over a full batch and returns an empty one to fill next.
func (f *freeList) put(batch []*recorded) []*recorded {
	f.mu.Lock()
	if len(f.full) < maxFreeBatches {
		f.full = append(f.full, batch)
		f.avail.Add(int32(len(batch)))
		batch = nil
	}
	var next []*recorded
	if n := len(f.empty); n > 0 {
		next, f.empty[n-1] = f.empty[n-1], nil
		f.empty = f.empty[:n-1]
	}
	f.mu.Unlock()
	if batch != nil {
		// The list is full: these go to the garbage collector, and the
		// batch is filled again.
		clear(batch)
		return batch[:0]
	}
	if next == nil {
		next = make([]*recorded, 0, freeBatch)
	}
	return next
}

// recycle gives r, which this worker took from its watcher, is the only
// consumer of, and did not hand out, back for reuse. Only the worker's
// goroutine calls it.
func (wk *worker) recycle(g *routine, r *recorded) {
	g.spare = append(g.spare, r)
	if len(g.spare) == freeBatch {
		g.spare = wk.b.free.put(g.spare)
	}
}
