package ctrl_test

import (
	"testing"

	"github.com/heraldgo/herald/k8s/internal/apiservertest"
)

// No goroutine may be left, herald's or controller-runtime's, once every
// manager has stopped (apiservertest.Main runs goleak, ignoring only klog's
// flush daemon, which no test can stop).
func TestMain(m *testing.M) { apiservertest.Main(m) }
