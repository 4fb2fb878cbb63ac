// Package bench measures herald against the Kubernetes machinery it replaces,
// side by side, on the same workloads and the same event type.
//
// The benchmarks live in the _test.go files of this package (package broadcast
// against k8s.io/apimachinery/pkg/watch) and of package eventsbench (package
// events against k8s.io/client-go/tools/record). Both systems carry
// watch.Event{Type, Object} values, so neither pays for a bigger element.
//
// Run them through the driver, which interleaves the two systems, takes
// medians and writes the table and the chart:
//
//	cd bench && go run ./cmd/compare            # full run, -count 5
//	cd bench && go run ./cmd/compare -smoke     # every benchmark once, for CI
//
// or directly, one system at a time:
//
//	cd bench && go test -run '^$' -bench 'Fanout/herald-C' -benchmem
//
// This is its own module so that herald's go.mod never requires Kubernetes.
package bench
