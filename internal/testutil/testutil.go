// Package testutil holds helpers shared by herald's tests.
package testutil

import (
	"fmt"
	"iter"
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

// CollectSeq ranges over seq until it ends or n values have arrived (all of
// them if n < 0), and fails the test if that takes longer than timeout (a
// guard against hangs, never a timing assertion). The loop runs in its own
// goroutine so that a sequence that never ends cannot hang the test; such a
// goroutine is left behind until the sequence ends.
func CollectSeq[T any](t testing.TB, seq iter.Seq[T], n int, timeout time.Duration) []T {
	t.Helper()
	done := make(chan []T, 1)
	go func() {
		var got []T
		if n != 0 {
			for v := range seq {
				got = append(got, v)
				if n > 0 && len(got) >= n {
					break
				}
			}
		}
		done <- got
	}()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	select {
	case got := <-done:
		return got
	case <-deadline.C:
		t.Fatalf("CollectSeq: timed out after %v waiting for %d values", timeout, n)
		return nil
	}
}

// PanicMessage calls f and reports whether it panicked, and with what
// message (the panic value formatted with %v).
func PanicMessage(f func()) (msg string, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			msg, panicked = fmt.Sprint(r), true
		}
	}()
	f()
	return "", false
}

// IsSubsequence reports whether sub can be obtained from seq by deleting
// elements, keeping the order of the rest.
func IsSubsequence[T comparable](sub, seq []T) bool {
	i := 0
	for _, v := range seq {
		if i < len(sub) && sub[i] == v {
			i++
		}
	}
	return i == len(sub)
}
