package rulescheck_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

const dashboardFile = "../dashboards/herald.json"

// The parts of a Grafana dashboard's JSON model the test reads.
type (
	dashboard struct {
		UID        string  `json:"uid"`
		Title      string  `json:"title"`
		Panels     []panel `json:"panels"`
		Templating struct {
			List []variable `json:"list"`
		} `json:"templating"`
	}
	panel struct {
		ID          int     `json:"id"`
		Type        string  `json:"type"`
		Title       string  `json:"title"`
		Description string  `json:"description"`
		Datasource  *dsRef  `json:"datasource"`
		Targets     []query `json:"targets"`
		Panels      []panel `json:"panels"` // a collapsed row's
		GridPos     struct {
			H, W, X, Y int
		} `json:"gridPos"`
	}
	query struct {
		RefID      string `json:"refId"`
		Expr       string `json:"expr"`
		Datasource *dsRef `json:"datasource"`
	}
	dsRef struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	}
	variable struct {
		Name       string          `json:"name"`
		Type       string          `json:"type"`
		Query      json.RawMessage `json:"query"` // a string, or {"query": "..."} for a Prometheus query variable
		Datasource *dsRef          `json:"datasource"`
		Multi      bool            `json:"multi"`
		IncludeAll bool            `json:"includeAll"`
	}
)

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// flatten returns every panel, rows' nested panels included, rows too.
func flatten(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, flatten(p.Panels)...)
	}
	return out
}

// grafanaIntervals are Grafana's built-in variables that stand for a
// duration; the test puts a duration in their place before parsing.
var grafanaIntervals = regexp.MustCompile(`\$\{?__(rate_interval|interval|range)\}?`)

// varRef finds references to dashboard variables ($name or ${name}).
var varRef = regexp.MustCompile(`\$\{?(\w+)\}?`)

// substitute replaces Grafana's interval variables by a duration. The
// dashboard's own variables stay: they may only appear inside label
// matchers' strings, where the parser takes them as text.
func substitute(expr string) string {
	return grafanaIntervals.ReplaceAllString(expr, "5m")
}

// checkExpr parses expr and checks, against the series a collector with
// every source kind exports: every selector names such a series, every
// label it matches on is one of that series' labels, a matcher holding a
// dashboard variable is a regexp match (the variables are multi-valued)
// on a defined variable, and every "by"/"without" label is a label of a
// series under that aggregation. It returns the series named.
func checkExpr(expr string, names map[string]map[string]bool, vars map[string]bool) ([]string, []error) {
	var errs []error
	for _, m := range varRef.FindAllStringSubmatch(expr, -1) {
		if !strings.HasPrefix(m[1], "__") && !vars[m[1]] {
			errs = append(errs, fmt.Errorf("$%s is not a variable of the dashboard", m[1]))
		}
	}
	e, err := parser.NewParser(parser.Options{}).ParseExpr(substitute(expr))
	if err != nil {
		return nil, append(errs, err)
	}
	var series []string
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			ls, ok := names[n.Name]
			if !ok {
				errs = append(errs, fmt.Errorf("%s is not a series the metrics module exports", n.Name))
				return nil
			}
			series = append(series, n.Name)
			for _, m := range n.LabelMatchers {
				if m.Name == labels.MetricName {
					continue
				}
				if !ls[m.Name] {
					errs = append(errs, fmt.Errorf("%s has no label %q", n.Name, m.Name))
				}
				if strings.Contains(m.Value, "$") && m.Type != labels.MatchRegexp {
					errs = append(errs, fmt.Errorf("%s{%s}: a variable must be matched with =~ (it may hold several values)", n.Name, m))
				}
			}
		case *parser.AggregateExpr:
			under := map[string]bool{}
			parser.Inspect(n.Expr, func(node parser.Node, _ []parser.Node) error {
				if vs, ok := node.(*parser.VectorSelector); ok {
					for l := range names[vs.Name] {
						under[l] = true
					}
				}
				return nil
			})
			for _, l := range n.Grouping {
				if !under[l] {
					errs = append(errs, fmt.Errorf("%s by/without %q: no series under it has that label", n.Op, l))
				}
			}
		}
		return nil
	})
	return series, errs
}

// labelValues matches a Prometheus query variable's label_values(selector, label).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

func TestDashboard(t *testing.T) {
	names := exported(t)
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Error("the dashboard needs a uid and a title")
	}

	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	if !vars["datasource"] {
		t.Fatal(`no "datasource" variable: every panel's data source is ${datasource}, so that the dashboard imports into any Grafana`)
	}
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			var q string
			if err := json.Unmarshal(v.Query, &q); err != nil || q != "prometheus" {
				t.Errorf("variable %s: query %s, want \"prometheus\"", v.Name, v.Query)
			}
		case "query":
			var q struct{ Query string }
			if err := json.Unmarshal(v.Query, &q); err != nil {
				if err := json.Unmarshal(v.Query, &q.Query); err != nil {
					t.Errorf("variable %s: query %s: %v", v.Name, v.Query, err)
					continue
				}
			}
			m := labelValues.FindStringSubmatch(q.Query)
			if m == nil {
				t.Errorf("variable %s: %q is not label_values(series, label)", v.Name, q.Query)
				continue
			}
			series, errs := checkExpr(m[1], names, vars)
			for _, err := range errs {
				t.Errorf("variable %s: %v", v.Name, err)
			}
			for _, s := range series {
				if !names[s][m[2]] {
					t.Errorf("variable %s: %s has no label %q", v.Name, s, m[2])
				}
			}
			if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
				t.Errorf("variable %s: data source %+v, want uid ${datasource}", v.Name, v.Datasource)
			}
		default:
			t.Errorf("variable %s: type %q not checked by this test", v.Name, v.Type)
		}
	}

	ids := map[int]string{}
	used := map[string]bool{}
	var boxes []panel
	n := 0
	for _, p := range flatten(d.Panels) {
		if prev, ok := ids[p.ID]; ok || p.ID == 0 {
			t.Errorf("panel %q: id %d not unique (also %q) or 0", p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		boxes = append(boxes, p)
		if p.Type == "row" {
			if len(p.Targets) > 0 {
				t.Errorf("row %q has queries", p.Title)
			}
			continue
		}
		n++
		if p.Title == "" || p.Description == "" {
			t.Errorf("panel %d: needs a title and a description (what the figure means)", p.ID)
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: data source %+v, want uid ${datasource}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no query", p.Title)
		}
		refs := map[string]bool{}
		for _, q := range p.Targets {
			if q.RefID == "" || refs[q.RefID] {
				t.Errorf("panel %q: refId %q empty or repeated", p.Title, q.RefID)
			}
			refs[q.RefID] = true
			if q.Datasource != nil && q.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q, query %s: data source %+v, want uid ${datasource}", p.Title, q.RefID, q.Datasource)
			}
			if strings.TrimSpace(q.Expr) == "" {
				t.Errorf("panel %q, query %s: no expression", p.Title, q.RefID)
				continue
			}
			series, errs := checkExpr(q.Expr, names, vars)
			for _, err := range errs {
				t.Errorf("panel %q, query %s: %v\n\t%s", p.Title, q.RefID, err, q.Expr)
			}
			for _, s := range series {
				used[s] = true
			}
		}
	}
	if n == 0 {
		t.Fatal("no panels")
	}

	// Every series the metrics module exports is on the dashboard: a
	// family added to the collector fails this test until it has a panel.
	for _, s := range slices.Sorted(func(yield func(string) bool) {
		for s := range names {
			if !yield(s) {
				return
			}
		}
	}) {
		if !used[s] {
			t.Errorf("%s is exported but on no panel", s)
		}
	}

	// Panels lie on Grafana's 24-column grid without overlapping.
	for i, a := range boxes {
		g := a.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", a.Title, g)
		}
		for _, b := range boxes[:i] {
			h := b.GridPos
			if g.X < h.X+h.W && h.X < g.X+g.W && g.Y < h.Y+h.H && h.Y < g.Y+g.H {
				t.Errorf("panels %q and %q overlap: %+v, %+v", b.Title, a.Title, h, g)
			}
		}
	}
}

// TestCheckExprCatches makes sure the dashboard test would fail: each
// expression below has one mistake checkExpr must report.
func TestCheckExprCatches(t *testing.T) {
	names := exported(t)
	vars := map[string]bool{"link": true}
	for _, expr := range []string{
		`rate(herald_natsbridge_link_sent[$__rate_interval])`,                       // not an exported name
		`rate(herald_natsbridge_link_sent_total{links=~"$link"}[5m])`,               // no such label
		`herald_natsbridge_link_pending{link="$link"}`,                              // a variable with =
		`herald_natsbridge_link_pending{link=~"$nolink"}`,                           // no such variable
		`sum by (broadcaster) (herald_natsbridge_link_pending)`,                     // by a label the series lacks
		`rate(herald_natsbridge_link_sent_total{link=~"$link"}[$__rate_interval]`,   // does not parse
		`rate(herald_natsbridge_link_sent_total{link=~"$link"}[$link])`,             // a variable outside a string
		`sum(herald_broadcast_watcher_queued) by (watcher, brodcaster)`,             // a misspelt label
		`herald_broadcast_watcher_queued{watcher=~"$link"} / herald_events_written`, // not an exported name
	} {
		if _, errs := checkExpr(expr, names, vars); len(errs) == 0 {
			t.Errorf("no error for %s", expr)
		}
	}
	if _, errs := checkExpr(`sum by (link) (rate(herald_natsbridge_link_sent_total{link=~"$link"}[$__rate_interval]))`, names, vars); len(errs) > 0 {
		t.Errorf("a correct expression: %v", errs)
	}
}
