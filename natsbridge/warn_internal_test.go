package natsbridge

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

type lineBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lineBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// take returns the lines written since the last call.
func (b *lineBuf) take() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSpace(b.buf.String())
	b.buf.Reset()
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// Guarantee 16's reporting: per link at most one Warn line per 10 s, the
// first loss at once, the ones in between summed up when the 10 s end, and
// a summary at close. A line counts values, not reports: a report of a
// gap of 40 values says values=40, a summary the sum of its reports'.
func TestWarnerRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := &lineBuf{}
		old := slog.Default()
		defer slog.SetDefault(old)
		slog.SetDefault(slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			},
		})))
		w := newWarner("In", "subj")
		boom := errors.New("boom")
		expect := func(step string, n int, contains ...string) {
			t.Helper()
			lines := out.take()
			if len(lines) != n {
				t.Fatalf("%s: %d lines, want %d: %q", step, len(lines), n, lines)
			}
			for _, c := range contains {
				if !strings.Contains(lines[0], c) {
					t.Errorf("%s: line %q lacks %q", step, lines[0], c)
				}
			}
		}

		w.warn(40, "first loss", boom)
		expect("first", 1, "level=WARN", `msg="natsbridge: first loss"`, "link=In", "subject=subj", "error=boom", "values=40")
		for i := range 5 {
			time.Sleep(time.Second)
			w.warn(uint64(i+1), "loss "+string(rune('a'+i)), boom)
		}
		expect("within 10 s", 0)
		time.Sleep(5 * time.Second) // 10 s after the first line
		synctest.Wait()
		expect("summary at 10 s", 1, "loss e (the latest of several reports)", "reports=5", "values=15")
		// A loss right after the summary waits for the next window.
		time.Sleep(time.Second)
		w.warn(1, "late loss", boom)
		synctest.Wait()
		expect("inside the new window", 0)
		time.Sleep(9 * time.Second)
		synctest.Wait()
		expect("second summary", 1, "late loss", "values=1")
		// After a quiet spell the next loss is logged at once.
		time.Sleep(time.Minute)
		w.warn(1, "after quiet", nil)
		expect("after quiet", 1, "after quiet", "values=1")
		w.warn(7, "before close", boom)
		w.warn(0, "before close 2", boom)
		expect("suppressed", 0)
		w.close()
		expect("close summary", 1, "before close 2", "reports=2", "values=7")
		w.warn(1, "after close", boom)
		time.Sleep(time.Minute)
		synctest.Wait()
		expect("after close", 0)
	})
}

func TestSubjectsOverlap(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"a.b", "a.b", true}, {"a.b", "a.c", false}, {"a.*", "a.b", true}, {"a.*", "a.b.c", false},
		{"a.>", "a.b.c", true}, {"a.>", "a", false}, {">", "a", true}, {"*.b", "a.*", true},
		{"a.b.>", "a.*", false}, {"a.*.>", "a.b.c", true}, {"a", "a.b", false},
	} {
		if got := subjectsOverlap(c.a, c.b); got != c.want {
			t.Errorf("subjectsOverlap(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := subjectsOverlap(c.b, c.a); got != c.want {
			t.Errorf("subjectsOverlap(%q, %q) = %v, want %v", c.b, c.a, got, c.want)
		}
	}
}

// discardLogs silences slog.Default until the returned function is called.
func discardLogs() func() {
	old := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler))
	return func() { slog.SetDefault(old) }
}
