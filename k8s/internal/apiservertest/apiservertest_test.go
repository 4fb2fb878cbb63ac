package apiservertest_test

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/heraldgo/herald/k8s/internal/apiservertest"
)

func TestMain(m *testing.M) { apiservertest.Main(m) }

func createConfigMap(t *testing.T, s *apiservertest.Server, ns, name string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"k": "v"}}
	_, err := s.Clientset().CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	return err
}

// TestSharedServerServes: the shared server stores objects, in a namespace
// of the test's own.
func TestSharedServerServes(t *testing.T) {
	s := apiservertest.Shared(t)
	ns := s.Namespace(t)
	if err := createConfigMap(t, s, ns, "a"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Clientset().CoreV1().ConfigMaps(ns).Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["k"] != "v" {
		t.Fatalf("stored %v, want k=v", got.Data)
	}
	if other := s.Namespace(t); other == ns {
		t.Fatalf("two namespaces named %s", ns)
	}
}

// TestRestartKeepsData: the API server stopped mid-test refuses
// connections; started again it serves the objects stored before.
func TestRestartKeepsData(t *testing.T) {
	s := apiservertest.Shared(t)
	ns := s.Namespace(t)
	if err := createConfigMap(t, s, ns, "before"); err != nil {
		t.Fatal(err)
	}
	_, api := s.PIDs()
	s.StopAPIServer()
	if !gone(api) {
		t.Fatalf("kube-apiserver %d still running after StopAPIServer", api)
	}
	if err := createConfigMap(t, s, ns, "while-down"); err == nil {
		t.Fatal("created an object while the API server was down")
	}
	if err := s.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Clientset().CoreV1().ConfigMaps(ns).Get(context.Background(), "before", metav1.GetOptions{}); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if err := createConfigMap(t, s, ns, "after"); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

// TestStopLeavesNothing: a server of its own, stopped, leaves no process
// and no data.
func TestStopLeavesNothing(t *testing.T) {
	apiservertest.Shared(t) // skips under -short
	s, err := apiservertest.Start(os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	etcd, api := s.PIDs()
	dir := s.Dir()
	if etcd == 0 || api == 0 {
		t.Fatalf("PIDs %d, %d: not running", etcd, api)
	}
	s.Stop()
	s.Stop() // idempotent
	for _, pid := range []int{etcd, api} {
		if !gone(pid) {
			t.Errorf("process %d still running after Stop", pid)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data directory %s: %v, want it removed", dir, err)
	}
}

// gone reports whether no process (or process group) pid exists.
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) && errors.Is(syscall.Kill(-pid, 0), syscall.ESRCH)
}
