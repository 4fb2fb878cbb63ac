package broadcast_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine is left behind once every test
// has finished: each test shuts its broadcasters down (guarantee 7).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
