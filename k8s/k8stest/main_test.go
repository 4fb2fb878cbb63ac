package k8stest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/heraldgo/herald/k8s/internal/apiservertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, apiservertest.IgnoreKlog) }
