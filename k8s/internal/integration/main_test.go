package integration

import (
	"testing"

	"github.com/heraldgo/herald/k8s/internal/apiservertest"
)

func TestMain(m *testing.M) { apiservertest.Main(m) }
