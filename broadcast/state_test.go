package broadcast_test

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/heraldgo/herald/broadcast"
)

// TestErrAndLen: Err() is nil while the watcher runs and after Stop, and
// ErrClosed after Shutdown (guarantee 11); Len() counts the values queued
// and not yet received, prefix values and those in C()'s buffer included
// (guarantee 8), on both read paths.
func TestErrAndLen(t *testing.T) {
	for _, rp := range readPaths {
		t.Run(rp.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newB(t)
				w, err := b.WatchWithPrefix([]int{-1}, with(broadcast.Drop, 5)...)
				if err != nil {
					t.Fatal(err)
				}
				if rp.name == "C" {
					w.C()
				}
				publish(t, b, 1, 2, 3)
				synctest.Wait() // a C() forwarder has filled the channel
				if got := w.Len(); got != 4 {
					t.Errorf("Len() = %d, want 4 (a prefix value and 3 published)", got)
				}
				if d := diff([]int{-1, 1}, rp.take(t, w, 2)); d != "" {
					t.Errorf("read (-want +got):\n%s", d)
				}
				synctest.Wait()
				if got := w.Len(); got != 2 {
					t.Errorf("Len() after reading 2 = %d, want 2", got)
				}
				if err := w.Err(); err != nil {
					t.Errorf("Err() while running = %v, want nil", err)
				}
				shutdown(t, b)
				if err := w.Err(); !errors.Is(err, broadcast.ErrClosed) {
					t.Errorf("Err() after Shutdown = %v, want ErrClosed", err)
				}
				if got := w.Len(); got != 2 {
					t.Errorf("Len() after Shutdown = %d, want 2: what it holds stays readable", got)
				}
				if d := diff([]int{2, 3}, rp.take(t, w, -1)); d != "" {
					t.Errorf("read after Shutdown (-want +got):\n%s", d)
				}
			})
		})
	}
	t.Run("Stop", func(t *testing.T) {
		b := newB(t)
		w := watch(t, b)
		publish(t, b, 1)
		w.Stop()
		if err := w.Err(); err != nil {
			t.Errorf("Err() after Stop = %v, want nil", err)
		}
		if got := w.Len(); got != 0 {
			t.Errorf("Len() after Stop = %d, want 0", got)
		}
	})
}
