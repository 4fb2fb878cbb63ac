// Package fidelity holds the differential test of herald's events.Correlator
// against client-go's EventCorrelator (k8s.io/client-go/tools/record,
// v0.37.2). It is a module of its own so that herald itself does not depend
// on client-go. Run it with `go test ./...` in this directory.
package fidelity
