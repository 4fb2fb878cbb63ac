package broadcast

import (
	"context"
	"errors"
	"runtime"
	"time"
)

// errWouldWait is lockTurn's answer to TryPublish when another publisher
// holds the turn.
var errWouldWait = errors.New("broadcast: would wait")

// publisherSpins is how many times a publisher waiting for room yields the
// processor and looks again before it blocks: readers usually make room
// within a scheduling round, and yielding is much cheaper than blocking.
const publisherSpins = 2

// waitState is a publisher's view of its own waiting: when it started (for
// BlockFor), whether it gave up (ctx ended or Shutdown aborted), and a timer
// reused across waits. It lives on the publisher's stack.
type waitState struct {
	start  time.Time
	now    time.Time
	giveUp bool
	timer  *time.Timer
}

func (ws *waitState) stop() {
	if ws.timer != nil {
		ws.timer.Stop()
	}
}

// expired reports whether a watcher with policy p has been waited for long
// enough: the publisher gave up, or p is BlockFor and its time is up.
func (ws *waitState) expired(p Policy) bool {
	if ws.giveUp {
		return true
	}
	return p.kind == kindBlockFor && !ws.start.IsZero() && !ws.now.IsZero() && ws.now.Sub(ws.start) >= p.wait
}

func (ws *waitState) deadline(p Policy) time.Time {
	if p.kind != kindBlockFor {
		return time.Time{}
	}
	return ws.start.Add(p.wait)
}

// wait blocks until a reader makes room (room), the earliest BlockFor
// deadline passes, ctx ends or Shutdown aborts. It reports whether the
// publisher must give up and with which error. Called without locks.
func (ws *waitState) wait(ctx context.Context, room, abort <-chan struct{}, deadline time.Time, spins int) (bool, error) {
	if spins < publisherSpins {
		runtime.Gosched()
		ws.now = time.Now()
		return false, nil
	}
	var tc <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if ws.timer == nil {
			ws.timer = time.NewTimer(d)
		} else {
			ws.timer.Reset(d)
		}
		tc = ws.timer.C
	}
	var give bool
	var err error
	select {
	case <-room:
	case <-tc:
	case <-ctx.Done():
		give, err = true, ctx.Err()
	case <-abort:
		give, err = true, ErrClosed
	}
	if ws.timer != nil {
		ws.timer.Stop()
	}
	ws.now = time.Now()
	return give, err
}
