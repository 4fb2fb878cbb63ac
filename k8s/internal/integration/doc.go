// Package integration tests package k8s against a real kube-apiserver (see
// internal/apiservertest): herald's drop-in next to client-go's recorder on
// the same event stream, the sink's faults, Shutdown's flush, and the
// throughput storm (make storm). It has no code of its own.
package integration
