package events

import (
	"log/slog"
	"sync"
)

// objectKey identifies an involved object for WithSinkConcurrency: events
// with the same key are correlated and written one at a time, in order.
type objectKey struct {
	kind, namespace, name, uid, apiVersion string
}

func objectKeyOf(e *Event) objectKey {
	o := &e.InvolvedObject
	return objectKey{o.Kind, o.Namespace, o.Name, o.UID, o.APIVersion}
}

// item is an event a concurrent sink took from its watcher, with its place
// in the order taken (1, 2, …), for Flush.
type item struct {
	r   *recorded
	idx uint64
}

// objectQueue holds the events about one object that wait for the one in
// flight.
type objectQueue struct {
	inFlight uint64 // idx of the event being written
	waiting  []item
}

// dispatch runs the sink of a worker with WithSinkConcurrency(n > 1). The
// worker's goroutine takes the events from the watcher, in order, and gives
// each to take: an event about an object with no event in flight starts a
// goroutine that writes it, then every event about that object queued
// behind it, in order, and exits when the object's queue is empty; an event
// about an object in flight waits in that object's queue. At most n such
// goroutines run; when n do, take waits for one to end (the next events
// wait in the watcher's queue meanwhile). So a retrying event holds up its
// own object and one of the n slots, nothing else, and no goroutine is
// left when the sink is idle.
//
// Events waiting in the objects' queues count against WithQueueLength
// together with those in the watcher's queue: take drops an event (counted
// in Dropped and reported as a full queue) that would make them more.
type dispatch struct {
	wk *worker
	n  int

	// mu guards the fields below. It is never held while calling the
	// sink or the correlator.
	mu      sync.Mutex
	objects map[objectKey]*objectQueue // objects with an event in flight
	running int                        // goroutines writing (len(objects))
	waiting int                        // events in the objects' queues
	taken   uint64                     // events taken, as numbered in item.idx
	holding uint64                     // idx of the event take waits with for a slot, 0 if none
	flushes []*flushCount              // Flush calls counting events down
	gone    bool                       // the worker stopped or exited: Flush waits no more

	free chan struct{} // a goroutine ended: take may start one
	wg   sync.WaitGroup
}

func newDispatch(wk *worker, n int) *dispatch {
	return &dispatch{wk: wk, n: n, objects: make(map[objectKey]*objectQueue), free: make(chan struct{}, 1)}
}

// take hands r, just taken from the watcher, to a writing goroutine, to
// its object's queue, or drops it. Only the worker's goroutine calls it.
func (d *dispatch) take(r *recorded) {
	wk := d.wk
	key := objectKeyOf(&r.Event)
	d.mu.Lock()
	d.taken++
	it := item{r, d.taken}
	for {
		if q := d.objects[key]; q != nil {
			if d.waiting+1+d.queued() > wk.b.cfg.queueLen {
				d.finishLocked(it.idx)
				d.mu.Unlock()
				wk.counts.dropped.Add(1)
				wk.reportDrops(1, &r.Event)
				return
			}
			q.waiting = append(q.waiting, it)
			d.waiting++
			d.mu.Unlock()
			return
		}
		if d.running < d.n {
			d.objects[key] = &objectQueue{inFlight: it.idx}
			d.running++
			d.wg.Add(1)
			d.mu.Unlock()
			go d.write(key, it)
			return
		}
		// Every slot is busy: wait for one, then look again (the object
		// may have become busy meanwhile).
		d.holding = it.idx
		d.mu.Unlock()
		select {
		case <-d.free:
		case <-wk.ctx.Done():
		}
		d.mu.Lock()
		d.holding = 0
		if wk.ctx.Err() != nil {
			d.giveUp(it.r)
			d.finishLocked(it.idx)
			d.mu.Unlock()
			return
		}
	}
}

// queued estimates the events in the watcher's queue: those published to
// it, less those it dropped and those taken. It may count a few events
// being published as not there yet.
func (d *dispatch) queued() int {
	wk := d.wk
	pub := wk.b.recorded.Load() - wk.recordedAtStart
	if wk.stopped.Load() {
		pub = wk.recordedAtStop - wk.recordedAtStart
	}
	got := wk.w.Dropped() + wk.taken
	if pub <= got {
		return 0
	}
	return int(pub - got)
}

// write is a goroutine that writes it, then the events queued behind it
// about the same object, in order.
func (d *dispatch) write(key objectKey, it item) {
	wk := d.wk
	g := new(routine)
	normal := false
	defer func() {
		if normal {
			return
		}
		// The goroutine is ending early on it (see worker.run): count
		// it, and go on with the object's queue on a new goroutine.
		wk.recoverEvent(g, recover())
		d.finish(it.idx)
		if next, ok := d.next(key); ok {
			go d.write(key, next)
		}
	}()
	for {
		if wk.ctx.Err() != nil {
			d.giveUp(it.r)
		} else {
			wk.process(wk, g, it.r)
		}
		d.finish(it.idx)
		next, ok := d.next(key)
		if !ok {
			normal = true
			return
		}
		it = next
	}
}

// next returns the next event queued about key, or ends the object's turn
// and frees the goroutine's slot (false).
func (d *dispatch) next(key objectKey) (item, bool) {
	d.mu.Lock()
	q := d.objects[key]
	if len(q.waiting) > 0 {
		it := q.waiting[0]
		q.waiting[0] = item{}
		q.waiting = q.waiting[1:]
		q.inFlight = it.idx
		d.waiting--
		d.mu.Unlock()
		return it, true
	}
	delete(d.objects, key)
	d.running--
	d.mu.Unlock()
	select {
	case d.free <- struct{}{}:
	default:
	}
	d.wg.Done()
	return item{}, false
}

// finish marks the event numbered idx as done with, for Flush.
func (d *dispatch) finish(idx uint64) {
	d.mu.Lock()
	d.finishLocked(idx)
	d.mu.Unlock()
}

// finishTaken is finish for an event take was not given: the worker
// numbers it here.
func (d *dispatch) finishTaken() {
	d.mu.Lock()
	d.taken++
	d.finishLocked(d.taken)
	d.mu.Unlock()
}

func (d *dispatch) finishLocked(idx uint64) {
	if len(d.flushes) == 0 {
		return
	}
	kept := d.flushes[:0]
	for _, f := range d.flushes {
		if idx <= f.upTo {
			f.left--
		}
		if f.left == 0 {
			close(f.done)
			continue
		}
		kept = append(kept, f)
	}
	clear(d.flushes[len(kept):])
	d.flushes = kept
}

// flushCount is a Flush call waiting for the events numbered up to upTo,
// of which left are not done with.
type flushCount struct {
	upTo uint64
	left uint64
	done chan struct{}
}

// await returns a channel closed once the first upTo events the worker
// takes are done with.
func (d *dispatch) await(upTo uint64) <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := &flushCount{upTo: upTo, done: make(chan struct{})}
	if d.gone {
		close(f.done)
		return f.done
	}
	if upTo > d.taken {
		f.left = upTo - d.taken
	}
	for _, q := range d.objects {
		if q.inFlight <= upTo {
			f.left++
		}
		for _, it := range q.waiting {
			if it.idx <= upTo {
				f.left++
			}
		}
	}
	if d.holding != 0 && d.holding <= upTo {
		f.left++
	}
	if f.left == 0 {
		close(f.done)
	} else {
		d.flushes = append(d.flushes, f)
	}
	return f.done
}

// releaseAll ends every Flush waiting (the worker stopped or exited).
func (d *dispatch) releaseAll() {
	d.mu.Lock()
	d.gone = true
	for _, f := range d.flushes {
		close(f.done)
	}
	clear(d.flushes)
	d.flushes = d.flushes[:0]
	d.mu.Unlock()
}

// giveUp counts and reports an event not written because the worker's
// ctx ended (see worker.giveUpQueued).
func (d *dispatch) giveUp(r *recorded) {
	d.wk.giveUpQueued()
	d.wk.b.rep.add(causeGaveUp, 1, &r.Event, d.wk.ctx.Err(), slog.String("by", d.wk.name))
}
