// Package testutil holds helpers shared by herald's tests.
package testutil

import (
	"testing"
	"time"
)

// Collect reads from ch until it is closed or n values have arrived, and
// fails the test if that takes longer than timeout (a guard against hangs,
// never a timing assertion).
func Collect[T any](t testing.TB, ch <-chan T, n int, timeout time.Duration) []T {
	t.Helper()
	var got []T
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for n < 0 || len(got) < n {
		select {
		case v, ok := <-ch:
			if !ok {
				return got
			}
			got = append(got, v)
		case <-deadline.C:
			t.Fatalf("Collect: timed out after %v with %d values: %v", timeout, len(got), got)
			return got
		}
	}
	return got
}

// Drain reads ch until it is closed, failing the test after timeout.
func Drain[T any](t testing.TB, ch <-chan T, timeout time.Duration) []T {
	t.Helper()
	return Collect(t, ch, -1, timeout)
}

// Seq returns the ints [from, to).
func Seq(from, to int) []int {
	s := make([]int, 0, max(0, to-from))
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}
