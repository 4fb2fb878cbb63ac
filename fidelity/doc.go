// Package fidelity holds the differential test of herald's events.Correlator
// against client-go's EventCorrelator (k8s.io/client-go/tools/record,
// v0.37.2), and herald's broadcast.Broadcaster side by side with
// apimachinery's watch.Broadcaster (k8s.io/apimachinery/pkg/watch, v0.37.2)
// at Shutdown (shutdown_test.go). It is a module of its own so that herald
// itself does not depend on client-go. Run it with `go test ./...` in this
// directory.
package fidelity
