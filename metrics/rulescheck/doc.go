// Package rulescheck holds tests only, for metrics/alerts and
// metrics/dashboards: every alert rule's expression and every dashboard
// panel's query parses with Prometheus' own PromQL parser and names only
// series (and labels) the metrics module exports, every exported series is
// on the dashboard, and each alert rule fires on the losses it is there
// for and not on quiet series (evaluated by Prometheus' engine). It is a
// module of its own so that the metrics module does not depend on
// github.com/prometheus/prometheus.
package rulescheck
