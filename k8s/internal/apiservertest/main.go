package apiservertest

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// shared is the server Main started for the test binary.
var shared *Server

// IgnoreKlog is the goroutine klog starts when it is loaded (its flush
// daemon), which no test can stop: client-go imports klog.
var IgnoreKlog = goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1")

// Main is a TestMain for packages that test against the real API server:
// it starts one server (building the binaries first if they are missing),
// runs the tests, stops the server, and then checks with goleak that no
// goroutine is left. With -short, no server is started and [Shared] skips
// the tests that need it.
//
//	func TestMain(m *testing.M) { apiservertest.Main(m) }
func Main(m *testing.M, opts ...goleak.Option) {
	flag.Parse()
	if !testing.Short() {
		start := time.Now()
		s, err := Start(os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if testing.Verbose() {
			fmt.Fprintf(os.Stderr, "apiservertest: kube-apiserver v%s ready at %s in %v\n", KubeVersion, s.config.Host, time.Since(start).Round(time.Millisecond))
		}
		shared = s
	}
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	if code == 0 {
		if err := goleak.Find(append([]goleak.Option{IgnoreKlog}, opts...)...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Shared returns the server that [Main] started, or skips t under -short.
func Shared(t testing.TB) *Server {
	t.Helper()
	if shared == nil {
		if testing.Short() {
			t.Skip("apiservertest: -short: no API server")
		}
		t.Fatal("apiservertest: no server: use apiservertest.Main in TestMain")
	}
	return shared
}
