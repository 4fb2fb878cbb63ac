// Package rulescheck holds a test only: every expression of metrics/alerts
// parses with Prometheus' own PromQL parser and names only series the
// metrics module exports. It is a module of its own so that the metrics
// module does not depend on github.com/prometheus/prometheus.
package rulescheck
