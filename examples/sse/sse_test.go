package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgo/herald/broadcast"
)

// event is one Server-Sent Event as a client sees it.
type event struct {
	id   uint64
	data string
}

// stream connects to url (resuming after lastID if resume) and sends every
// event it reads to f until f returns false or the stream ends; it then
// disconnects. It returns the status code.
func stream(ctx context.Context, url string, resume bool, lastID uint64, f func(event) bool) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // disconnects mid-stream when f says stop
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if resume {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(lastID, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	sc := bufio.NewScanner(resp.Body)
	var ev event
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			ev.id, err = strconv.ParseUint(strings.TrimPrefix(line, "id: "), 10, 64)
			if err != nil {
				return resp.StatusCode, err
			}
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		case line == "":
			if !f(ev) {
				return resp.StatusCode, nil
			}
			ev = event{}
		}
	}
	return resp.StatusCode, nil
}

// TestResumeAfterDisconnect: clients that disconnect mid-stream, at
// different points, and reconnect with Last-Event-ID receive every value
// exactly once, in order, while the stream goes on; a slow client is
// evicted, reconnects and loses nothing either.
func TestResumeAfterDisconnect(t *testing.T) {
	const values, clients = 2000, 8
	b := broadcast.New[string](broadcast.WithHistory(values))
	srv := httptest.NewServer(&Handler{B: b, QueueLength: 16})
	defer srv.Close()
	url := srv.URL + "/events"

	var wg sync.WaitGroup
	results := make([][]event, clients)
	reconnects := make([]int, clients)
	for c := range clients {
		wg.Go(func() {
			var got []event
			for len(got) < values {
				var last uint64
				if len(got) > 0 {
					last = got[len(got)-1].id
				}
				n := 0
				// Client c disconnects after every 37*(c+1) events.
				code, err := stream(context.Background(), url, true, last, func(ev event) bool {
					got = append(got, ev)
					n++
					if c == clients-1 && n%50 == 0 {
						time.Sleep(5 * time.Millisecond) // a slow client: evicted, resumes
					}
					return n < 37*(c+1) && len(got) < values
				})
				if err != nil || code != http.StatusOK {
					t.Errorf("client %d: status %d, %v", c, code, err)
					return
				}
				reconnects[c]++
			}
			results[c] = got
		})
	}
	for v := 1; v <= values; v++ {
		if err := b.Publish(fmt.Sprintf("value %d", v)); err != nil {
			t.Fatal(err)
		}
		if v%100 == 0 {
			time.Sleep(time.Millisecond) // let clients disconnect mid-stream
		}
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	t.Logf("evictions (drops): %d", b.Stats().Dropped)
	for c, got := range results {
		if len(got) != values {
			t.Errorf("client %d: %d events, want %d", c, len(got), values)
			continue
		}
		for i, ev := range got {
			if want := (event{uint64(i + 1), fmt.Sprintf("value %d", i+1)}); ev != want {
				t.Errorf("client %d: event %d is %+v, want %+v (a gap or a duplicate)", c, i, ev, want)
				break
			}
		}
		if reconnects[c] < 2 {
			t.Errorf("client %d connected %d times, want it to have disconnected mid-stream", c, reconnects[c])
		}
	}
}

// TestGoneWhenNotKept: a Last-Event-ID older than the history is 410 Gone.
func TestGoneWhenNotKept(t *testing.T) {
	b := broadcast.New[string](broadcast.WithHistory(2))
	srv := httptest.NewServer(&Handler{B: b})
	defer srv.Close()
	for v := range 5 {
		b.Publish(strconv.Itoa(v))
	}
	code, err := stream(context.Background(), srv.URL, true, 1, func(event) bool { return false })
	if err != nil || code != http.StatusGone {
		t.Errorf("resume after 1 with only 4..5 kept: status %d, %v; want 410", code, err)
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestMaxLastEventID: the largest Last-Event-ID is refused (400), not read
// as "replay everything" (last+1 wraps to 0, WatchFrom(0)).
func TestMaxLastEventID(t *testing.T) {
	b := broadcast.New[string](broadcast.WithHistory(10))
	srv := httptest.NewServer(&Handler{B: b})
	defer srv.Close()
	for v := range 5 {
		b.Publish(strconv.Itoa(v))
	}
	replayed := 0
	code, err := stream(context.Background(), srv.URL, true, math.MaxUint64, func(event) bool { replayed++; return false })
	if err != nil || code != http.StatusBadRequest || replayed != 0 {
		t.Errorf("Last-Event-ID %d: status %d, %v, %d events replayed; want 400 and none", uint64(math.MaxUint64), code, err, replayed)
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
