package rulescheck_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type stats struct{ Sent, Received, Failed, Dropped, Lost, Pending uint64 }
type link struct{ done chan struct{} }

func (l *link) Stats() stats          { return stats{} }
func (l *link) Err() error            { return errors.New("x") }
func (l *link) Done() <-chan struct{} { return l.done }

type watcher struct{}

func (watcher) Dropped() uint64 { return 0 }
func (watcher) Len() int        { return 0 }
func (watcher) Err() error      { return nil }

// exported gathers a collector holding a source of every kind and returns
// the name of every series it exports with the set of its label names.
func exported(t *testing.T) map[string]map[string]bool {
	b := broadcast.New[int]()
	defer b.Shutdown(context.Background())
	eb := events.NewBroadcaster(events.WithLogger(slog.New(slog.DiscardHandler)))
	defer eb.Shutdown(context.Background())
	c := metrics.NewCollector()
	c.Add("b", b)
	c.AddWatcher("b", "w", watcher{})
	c.AddEvents("e", eb)
	c.AddLink("l", &link{done: make(chan struct{})})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := make(map[string]map[string]bool)
	for _, mf := range mfs {
		labels := make(map[string]bool)
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = true
			}
		}
		names[mf.GetName()] = labels
	}
	return names
}

func TestAlertRules(t *testing.T) {
	names := exported(t)
	p := parser.NewParser(parser.Options{})
	rgs, errs := rulefmt.ParseFile("../alerts/herald-rules.yml", false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Fatal(err)
	}
	n := 0
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			n++
			if r.For == 0 || r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: needs for, labels.severity, annotations summary and description", r.Alert)
			}
			e, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Errorf("%s: %v", r.Alert, err)
				continue
			}
			parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
				if vs, ok := node.(*parser.VectorSelector); ok && names[vs.Name] == nil {
					t.Errorf("%s: %s is not a series the metrics module exports", r.Alert, vs.Name)
				}
				return nil
			})
		}
	}
	if n == 0 {
		t.Fatal("no rules")
	}
}
