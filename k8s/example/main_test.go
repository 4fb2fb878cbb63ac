package example_test

import (
	"testing"

	"github.com/heraldgo/herald/k8s/internal/apiservertest"
)

// goleak with no ignores but klog's flush daemon (apiservertest.Main): once
// the manager has stopped, no goroutine is left, herald's or
// controller-runtime's.
func TestMain(m *testing.M) { apiservertest.Main(m) }
