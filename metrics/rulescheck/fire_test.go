package rulescheck_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
)

// loadRules returns every alert's expression by name.
func loadRules(t *testing.T) map[string]string {
	t.Helper()
	rgs, errs := rulefmt.ParseFile("../alerts/herald-rules.yml", false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Fatal(err)
	}
	rules := map[string]string{}
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			rules[r.Alert] = r.Expr
		}
	}
	return rules
}

// A scenario is 31 minutes of series, one sample a minute, in promqltest's
// load syntax (one series per line); an alert's expression is evaluated
// at its end.
type scenario string

// fires evaluates expr at the end of s and reports whether it returns
// anything, i.e. whether the alert is pending (it fires once that lasts
// its "for").
func fires(t *testing.T, expr string, s scenario) bool {
	t.Helper()
	var load strings.Builder
	load.WriteString("load 1m\n")
	for line := range strings.Lines(string(s)) {
		if line = strings.TrimSpace(line); line != "" {
			load.WriteString("  " + line + "\n")
		}
	}
	st := promqltest.LoadedStorage(t, load.String())
	t.Cleanup(func() { st.Close() })
	ng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, Parser: parser.NewParser(parser.Options{})})
	t.Cleanup(func() { ng.Close() })
	q, err := ng.NewInstantQuery(context.Background(), st, nil, expr, time.Unix(0, 0).Add(30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	res := q.Exec(context.Background())
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	v, err := res.Vector()
	if err != nil {
		t.Fatal(err)
	}
	return len(v) > 0
}

// TestAlertRulesFire evaluates every alert rule on series that must make
// it fire and on series that must not: each loss or failure the rules are
// there for (drops, evictions, lost, failed and dropped link values,
// pending, a link down, events lost) is a case. A rule without a case
// fails the test.
func TestAlertRulesFire(t *testing.T) {
	rules := loadRules(t)
	// All four lost-event counters are exported together; one grows.
	events := func(grows string) scenario {
		var b strings.Builder
		for _, f := range []string{"dropped", "invalid", "failed", "abandoned"} {
			pts := "3x30"
			if f == grows {
				pts = "3x20 3+1x10"
			}
			b.WriteString(`herald_events_` + f + `_total{broadcaster="rec"} ` + pts + "\n")
		}
		return scenario(b.String())
	}
	cases := []struct {
		alert string
		fire  []scenario
		quiet []scenario
	}{
		{"HeraldWatcherDropping",
			[]scenario{`herald_broadcast_watcher_dropped_total{broadcaster="b",watcher="w"} 0+10x30`},
			[]scenario{`herald_broadcast_watcher_dropped_total{broadcaster="b",watcher="w"} 5x30`}},
		{"HeraldBroadcasterDropping",
			[]scenario{
				`herald_broadcast_dropped_total{broadcaster="b"} 0+10x30`,
				// a registered watcher that does not drop: the drops are elsewhere
				`herald_broadcast_dropped_total{broadcaster="b"} 0+10x30
				herald_broadcast_watcher_dropped_total{broadcaster="b",watcher="w"} 0x30`,
			},
			[]scenario{
				`herald_broadcast_dropped_total{broadcaster="b"} 7x30`,
				// HeraldWatcherDropping names the watcher instead
				`herald_broadcast_dropped_total{broadcaster="b"} 0+10x30
				herald_broadcast_watcher_dropped_total{broadcaster="b",watcher="w"} 0+10x30`,
			}},
		{"HeraldWatcherEnded",
			[]scenario{`herald_broadcast_watcher_ended{broadcaster="b",watcher="w"} 0x20 1x10`},
			[]scenario{`herald_broadcast_watcher_ended{broadcaster="b",watcher="w"} 0x30`}},
		{"HeraldLinkDown",
			[]scenario{`herald_natsbridge_link_ended{link="in"} 0x20 1x10
			herald_natsbridge_link_up{link="in"} 1x20 0x10`},
			// closed by its owner: not up, not ended
			[]scenario{`herald_natsbridge_link_ended{link="in"} 0x30
			herald_natsbridge_link_up{link="in"} 1x20 0x10`}},
		{"HeraldLinkLost",
			[]scenario{`herald_natsbridge_link_lost_total{link="in"} 0x25 0+40x5`},
			[]scenario{`herald_natsbridge_link_lost_total{link="in"} 164x30`}},
		{"HeraldLinkFailed",
			[]scenario{`herald_natsbridge_link_failed_total{link="out"} 0x28 1x2`},
			[]scenario{`herald_natsbridge_link_failed_total{link="out"} 1x30`}},
		{"HeraldLinkDropped",
			[]scenario{`herald_natsbridge_link_dropped_total{link="in"} 0x25 0+100x5`},
			[]scenario{`herald_natsbridge_link_dropped_total{link="in"} 0x30`}},
		{"HeraldLinkPendingGrowing",
			[]scenario{`herald_natsbridge_link_pending{link="out"} 0+10x30`},
			[]scenario{
				`herald_natsbridge_link_pending{link="out"} 0x30`,
				`herald_natsbridge_link_pending{link="out"} 300-10x30`,
			}},
		{"HeraldLinkStalled",
			[]scenario{`herald_natsbridge_link_pending{link="out"} 1x30
			herald_natsbridge_link_sent_total{link="out"} 0+100x20 2000x10`},
			[]scenario{
				`herald_natsbridge_link_pending{link="out"} 200x30
				herald_natsbridge_link_sent_total{link="out"} 0+100x30`,
				`herald_natsbridge_link_pending{link="out"} 0x30
				herald_natsbridge_link_sent_total{link="out"} 500x30`,
			}},
		{"HeraldEventsLost",
			[]scenario{events("dropped"), events("invalid"), events("failed"), events("abandoned")},
			[]scenario{events("")}},
	}
	tested := map[string]bool{}
	for _, c := range cases {
		expr, ok := rules[c.alert]
		if !ok {
			t.Errorf("%s: no such alert in the rules", c.alert)
			continue
		}
		tested[c.alert] = true
		for i, s := range c.fire {
			if !fires(t, expr, s) {
				t.Errorf("%s does not fire on case %d:\n%s", c.alert, i, s)
			}
		}
		for i, s := range c.quiet {
			if fires(t, expr, s) {
				t.Errorf("%s fires on quiet case %d:\n%s", c.alert, i, s)
			}
		}
	}
	for a := range rules {
		if !tested[a] {
			t.Errorf("%s has no case in TestAlertRulesFire", a)
		}
	}
}
