package natsbridge_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine is left behind once every test
// has finished: each test closes its links and connections and stops its
// embedded server, waiting for it. A child process started by a
// cross-process test (see process_test.go) runs its role instead of tests.
func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role))
	}
	goleak.VerifyTestMain(m)
}
