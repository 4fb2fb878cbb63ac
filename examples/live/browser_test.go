package main

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath finds Debian's chromium, or skips the test (fails it when
// HERALD_REQUIRE_BROWSER=1, as CI sets).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("HERALD_REQUIRE_BROWSER") == "1" {
		t.Fatal("chromium not found in PATH and HERALD_REQUIRE_BROWSER=1 (apt-get install -y chromium)")
	}
	t.Skip("chromium not found in PATH: skipping the browser test (apt-get install -y chromium; HERALD_REQUIRE_BROWSER=1 makes this a failure)")
	return ""
}

// browser starts a headless chromium with a fresh profile; the cleanup
// closes it and waits for the process to exit.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() {
		// Cancel closes the browser; cancelling the allocator kills the
		// process if it is still there and waits for it to exit.
		cancelBrowser()
		cancelAlloc()
	})
	// Start the browser now, so that a failure to start is reported as such.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// panelState is what a panel of the page shows.
type panelState struct {
	Name     string `json:"name"`
	Last     string `json:"last"`
	Received string `json:"received"`
	Gaps     string `json:"gaps"`
	Dropped  string `json:"dropped"`
	Log      string `json:"log"`
}

func num(t *testing.T, s string) uint64 {
	t.Helper()
	if s == "–" || s == "" {
		return 0
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("page shows %q where a number belongs", s)
	}
	return n
}

const readPanels = `(() => {
  const out = {};
  for (const p of document.querySelectorAll(".panel")) {
    const q = (s) => p.querySelector(s).textContent;
    out[p.id] = {name: q(".name"), last: q(".last"), received: q(".received"),
                 gaps: q(".gaps"), dropped: q(".dropped"), log: q(".log")};
  }
  return out;
})()`

// plotState is what a panel's plot holds and shows: its samples (the
// newest one), how many it holds, how often it was drawn, and the canvas'
// pixels as a data URL.
type plotState struct {
	Samples int `json:"samples"`
	Draws   int `json:"draws"`
	Last    struct {
		Received, Dropped, Queued float64
	} `json:"last"`
	MaxDropped float64 `json:"maxDropped"`
	Pixels     string  `json:"pixels"`
}

const readPlots = `(() => {
  const out = {};
  for (const [id, st] of Object.entries(plots)) {
    const s = st.samples, last = s[s.length - 1] || {received: 0, dropped: 0, queued: 0};
    out[id] = {samples: s.length, draws: st.draws,
               last: {Received: last.received, Dropped: last.dropped, Queued: last.queued},
               maxDropped: Math.max(0, ...s.map((p) => p.dropped)),
               pixels: document.querySelector("#" + id + " .plot").toDataURL()};
  }
  return out;
})()`

// TestBrowser opens the page in headless chromium, waits for values in the
// panels, checks that every panel's plot moves (new samples, new points,
// new pixels between two looks), presses Burst, and checks that the lossy
// watcher's drop counter rises, equals the gaps the page saw, matches
// /metrics and shows in its plot, while the lossless watcher loses nothing.
func TestBrowser(t *testing.T) {
	_, srv := startDemo(t)
	ctx := browser(t)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()

	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	var panels map[string]panelState
	read := func() {
		t.Helper()
		var err error
		if panels, err = chromedp.Run(ctx, chromedp.Evaluate[map[string]panelState](readPanels)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for {
			read()
			if ok() {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %v; the page shows %+v", what, ctx.Err(), panels)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}

	waitFor("values in every panel", func() bool {
		for _, k := range []string{"lossless", "lossy", "latest"} {
			if num(t, panels[k].Received) < 2 {
				return false
			}
		}
		return true
	})
	for _, k := range []string{"lossless", "lossy", "latest"} {
		if panels[k].Log == "" || panels[k].Name == "…" {
			t.Errorf("panel %s shows no watcher name or value log: %+v", k, panels[k])
		}
	}
	// The plots move: between two looks a second apart each has new
	// samples, its newest one counts more values received, and its canvas
	// shows different pixels.
	readPlotState := func() map[string]plotState {
		t.Helper()
		p, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]plotState](readPlots))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	before := readPlotState()
	var after map[string]plotState
	waitFor("the plots to move", func() bool {
		after = readPlotState()
		for _, k := range []string{"lossless", "lossy", "latest"} {
			if after[k].Samples < before[k].Samples+4 || after[k].Last.Received <= before[k].Last.Received {
				return false
			}
		}
		return true
	})
	for _, k := range []string{"lossless", "lossy", "latest"} {
		b, a := before[k], after[k]
		if b.Samples == 0 || a.Draws <= b.Draws {
			t.Errorf("plot %s: %d samples and %d draws before, %d draws after; want it drawn from samples, again and again", k, b.Samples, b.Draws, a.Draws)
		}
		if a.Pixels == b.Pixels {
			t.Errorf("plot %s: the canvas shows the same pixels after %d more samples", k, a.Samples-b.Samples)
		}
	}

	if d := num(t, panels["lossy"].Dropped); d != 0 {
		t.Errorf("lossy dropped %d before any burst; the test's pace should not make it drop", d)
	}

	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS("#burst")),
		chromedp.WaitVisible(chromedp.CSS("#burst-result[data-last]")),
	); err != nil {
		t.Fatal(err)
	}
	attr, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("#burst-result"), "data-last"))
	if err != nil || !attr.Exists {
		t.Fatalf("reading the burst's last value: %v (attribute present %v)", err, attr.Exists)
	}
	last := num(t, attr.Value)

	// Once a value published after the burst has arrived, the lossy
	// watcher's count includes every drop the burst caused.
	waitFor("values after the burst", func() bool {
		return num(t, panels["lossy"].Last) > last && num(t, panels["lossless"].Last) > last
	})
	lossy, lossless := panels["lossy"], panels["lossless"]
	dropped := num(t, lossy.Dropped)
	if dropped == 0 {
		t.Errorf("lossy shows no drop after a burst of 100 into a queue of 4: %+v", lossy)
	}
	if g := num(t, lossy.Gaps); g != dropped {
		t.Errorf("lossy shows %d values missing and %d dropped; they must match", g, dropped)
	}
	if num(t, lossless.Dropped) != 0 || num(t, lossless.Gaps) != 0 {
		t.Errorf("lossless lost values: %+v", lossless)
	}
	if num(t, lossless.Received) < 100 {
		t.Errorf("lossless received %s values, want the burst's 100 at least", lossless.Received)
	}

	// The plot shows the burst's drops: a sample taken after it counts them.
	waitFor("the lossy plot to show the drops", func() bool {
		return readPlotState()["lossy"].MaxDropped >= float64(dropped)
	})
	if p := readPlotState(); p["lossless"].MaxDropped != 0 {
		t.Errorf("the lossless plot shows %v dropped", p["lossless"].MaxDropped)
	}

	got := scrapeMetrics(t, srv)
	for key, want := range map[string]float64{
		"herald_broadcast_watcher_dropped_total{" + lossy.Name + "}":    float64(dropped),
		"herald_broadcast_watcher_dropped_total{" + lossless.Name + "}": 0,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("/metrics %s = %v (present %v), want %v, as the page shows", key, v, ok, want)
		}
	}
	if w := got["herald_broadcast_watchers"]; w != 3 {
		t.Errorf("/metrics watchers = %v, want the page's 3", w)
	}
}
