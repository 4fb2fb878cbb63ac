// Package apiservertest runs a real kube-apiserver, backed by a real etcd,
// for the tests of module github.com/heraldgo/herald/k8s.
//
// The binaries are built once from the Go module proxy by
// k8s/hack/build-apiserver.sh into a cache directory keyed by version
// ($HERALD_K8S_CACHE, else ~/.cache/herald/k8s-v1.37.2-etcd-v3.6.16); Start
// runs the script when they are missing, so a clean machine builds them on
// its first run. Both processes listen on free loopback ports, keep their
// data in a temporary directory, run in process groups of their own and are
// killed, with their data removed, by [Server.Stop].
//
// One server per test binary keeps the cost low: [Main] starts it in
// TestMain, [Shared] hands it to tests, and each test takes a namespace of
// its own with [Server.Namespace].
package apiservertest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Versions of the binaries the harness runs, as built by
// hack/build-apiserver.sh.
const (
	KubeVersion = "1.37.2"
	EtcdVersion = "3.6.16"
)

// startTimeout bounds how long a process may take to become ready. The
// machines this runs on are small and shared: the API server needs several
// seconds when idle, much longer under load.
const startTimeout = 3 * time.Minute

// CacheDir is where the binaries are (or will be) built: $HERALD_K8S_CACHE,
// else ${XDG_CACHE_HOME:-$HOME/.cache}/herald/k8s-v<kube>-etcd-v<etcd>, as in
// the build script.
func CacheDir() string {
	if d := os.Getenv("HERALD_K8S_CACHE"); d != "" {
		return d
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "herald", "k8s-v"+KubeVersion+"-etcd-v"+EtcdVersion)
}

// Binaries returns the directory holding kube-apiserver and etcd, running
// hack/build-apiserver.sh first if either is missing (minutes, once per
// machine). The script's output goes to w.
func Binaries(w io.Writer) (string, error) {
	dir := CacheDir()
	if executable(filepath.Join(dir, "kube-apiserver")) && executable(filepath.Join(dir, "etcd")) {
		return dir, nil
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("apiservertest: cannot locate hack/build-apiserver.sh")
	}
	script := filepath.Join(filepath.Dir(file), "..", "..", "hack", "build-apiserver.sh")
	fmt.Fprintf(w, "apiservertest: building kube-apiserver v%s and etcd v%s into %s (once; minutes)\n", KubeVersion, EtcdVersion, dir)
	cmd := exec.Command("bash", script, dir)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("apiservertest: %s: %w", script, err)
	}
	if !executable(filepath.Join(dir, "kube-apiserver")) || !executable(filepath.Join(dir, "etcd")) {
		return "", fmt.Errorf("apiservertest: %s ran but %s lacks the binaries", script, dir)
	}
	return dir, nil
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Server is a running etcd and kube-apiserver. Its methods are safe for
// concurrent use.
type Server struct {
	bin, dir string
	token    string
	apiPort  int
	etcdURL  string
	apiArgs  []string

	transport *http.Transport
	config    *rest.Config
	client    kubernetes.Interface

	mu   sync.Mutex // guards etcd, api, nsN
	etcd *process
	api  *process
	nsN  int
}

// process is a child running in a process group of its own.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when Wait returned
}

// Start builds the binaries if needed (see [Binaries]; the build's output
// goes to buildLog), then starts etcd and kube-apiserver and waits until
// the API server is ready. Call Stop when done.
func Start(buildLog io.Writer) (s *Server, err error) {
	bin, err := Binaries(buildLog)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "herald-apiserver-")
	if err != nil {
		return nil, fmt.Errorf("apiservertest: %w", err)
	}
	s = &Server{bin: bin, dir: dir}
	defer func() {
		if err != nil {
			s.Stop()
			s = nil
		}
	}()
	if err := s.writeCredentials(); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	clientPort, peerPort := ports[0], ports[1]
	s.apiPort = ports[2]
	s.etcdURL = "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	s.etcd, err = startProcess("etcd", filepath.Join(bin, "etcd"), dir,
		"--name=default",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+s.etcdURL,
		"--advertise-client-urls="+s.etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		// Tests need no durability, and fsync is most of etcd's write
		// latency on a shared disk.
		"--unsafe-no-fsync",
		"--log-level=warn",
	)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(s.etcd, http.DefaultClient, s.etcdURL+"/health", nil); err != nil {
		return nil, err
	}

	s.apiArgs = []string{
		"--etcd-servers=" + s.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(s.apiPort),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=AlwaysAllow",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		// No kubernetes Service endpoints to maintain: one server, on
		// loopback.
		"--endpoint-reconciler-type=none",
		// Priority and fairness makes the server create and watch its
		// configuration objects at start; the tests need none of it.
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	}
	s.transport = &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, // the server's self-signed certificate
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}
	s.config = &rest.Config{
		Host:        "https://127.0.0.1:" + strconv.Itoa(s.apiPort),
		BearerToken: s.token,
		// A transport of our own, instead of client-go's process-wide
		// cache, so that Stop can close its idle connections and leave
		// no goroutine behind.
		Transport: s.transport,
		// No client-side rate limit: tests measure the server and the
		// event pipelines, not client-go's token bucket (5 QPS by
		// default). Tests that want one set it on their copy.
		QPS:     -1,
		Timeout: 30 * time.Second,
	}
	s.client, err = kubernetes.NewForConfig(s.config)
	if err != nil {
		return nil, fmt.Errorf("apiservertest: %w", err)
	}
	if err := s.StartAPIServer(); err != nil {
		return nil, err
	}
	return s, nil
}

// writeCredentials writes the bearer token file and the service account
// signing key.
func (s *Server) writeCredentials() error {
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return fmt.Errorf("apiservertest: %w", err)
	}
	s.token = hex.EncodeToString(tok[:])
	tokens := fmt.Sprintf("%s,admin,admin-uid,\"system:masters\"\n", s.token)
	if err := os.WriteFile(filepath.Join(s.dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return fmt.Errorf("apiservertest: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("apiservertest: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("apiservertest: %w", err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	if err := os.WriteFile(filepath.Join(s.dir, "sa.key"), pemKey, 0o600); err != nil {
		return fmt.Errorf("apiservertest: %w", err)
	}
	return nil
}

// Config returns a copy of the configuration of a client with every
// permission. It has no client-side rate limit.
func (s *Server) Config() *rest.Config { return rest.CopyConfig(s.config) }

// Clientset returns a clientset made from Config.
func (s *Server) Clientset() kubernetes.Interface { return s.client }

// Namespace creates a namespace for t's exclusive use and returns its name.
// It is not deleted: without a controller manager, a deleted namespace
// stays Terminating, and the server's data goes away with it anyway.
func (s *Server) Namespace(t interface {
	Helper()
	Name() string
	Fatalf(string, ...any)
}) string {
	t.Helper()
	s.mu.Lock()
	s.nsN++
	n := s.nsN
	s.mu.Unlock()
	name := fmt.Sprintf("t%d-%s", n, sanitize(t.Name()))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("apiservertest: creating namespace %s: %v", name, err)
	}
	return name
}

// sanitize makes a test name a valid part of a namespace name (a DNS label:
// lowercase alphanumerics and '-', at most 63 characters).
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 50 {
		out = strings.TrimRight(out[:50], "-")
	}
	return out
}

// StopAPIServer stops kube-apiserver (etcd keeps running, with the data);
// StartAPIServer starts it again on the same port. For tests of a server
// that goes away mid-stream.
func (s *Server) StopAPIServer() {
	s.mu.Lock()
	p := s.api
	s.api = nil
	s.mu.Unlock()
	p.stop()
	s.transport.CloseIdleConnections()
}

// StartAPIServer starts kube-apiserver, if it is not running, and waits
// until it is ready: /readyz answers ok and the default namespace exists.
func (s *Server) StartAPIServer() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.api != nil {
		return nil
	}
	p, err := startProcess("kube-apiserver", filepath.Join(s.bin, "kube-apiserver"), s.dir, s.apiArgs...)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: s.transport, Timeout: 10 * time.Second}
	if err := waitHTTP(p, hc, s.config.Host+"/readyz", http.Header{"Authorization": {"Bearer " + s.token}}); err != nil {
		p.stop()
		return err
	}
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := s.client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		cancel()
		if err == nil {
			break
		}
		if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			p.stop()
			return fmt.Errorf("apiservertest: namespace default: %w%s", err, p.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.api = p
	return nil
}

// Stop kills both processes (their whole process groups), waits for them
// and removes their data. It is idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	api, etcd := s.api, s.etcd
	s.api, s.etcd = nil, nil
	s.mu.Unlock()
	api.stop()
	etcd.stop()
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// PIDs returns the process ids of etcd and kube-apiserver (0 for one that
// is not running), for tests that check that nothing is left behind.
func (s *Server) PIDs() (etcd, api int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.etcd != nil {
		etcd = s.etcd.cmd.Process.Pid
	}
	if s.api != nil {
		api = s.api.cmd.Process.Pid
	}
	return etcd, api
}

// Dir is the directory holding the server's data and logs, removed by Stop.
func (s *Server) Dir() string { return s.dir }

func startProcess(name, path, dir string, args ...string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("apiservertest: %w", err)
	}
	defer f.Close() // the child has its own descriptor
	cmd := exec.Command(path, args...)
	// An *os.File as stdout and stderr: no copying goroutine.
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = dir
	// A process group of its own, so that stop kills whatever it forked,
	// and so that a ^C to the test does not reach it before Stop does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("apiservertest: starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM to p's process group, then SIGKILL if it has not
// exited within 10 seconds, and waits for it. A nil p is a no-op.
func (p *process) stop() {
	if p == nil {
		return
	}
	pgid := p.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Anything it forked that outlived it.
	syscall.Kill(-pgid, syscall.SIGKILL)
}

// tail returns the end of p's log, for error messages.
func (p *process) tail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	const max = 4000
	if len(b) > max {
		b = b[len(b)-max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return "\n--- " + p.name + " log (end) ---\n" + string(b)
}

// waitHTTP polls url until it answers 200, p exits, or startTimeout passes.
func waitHTTP(p *process, hc *http.Client, url string, h http.Header) error {
	deadline := time.Now().Add(startTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("apiservertest: %s exited while starting: %v%s", p.name, p.cmd.ProcessState, p.tail())
		default:
		}
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		hdr := req.Header
		for k, v := range h {
			hdr[k] = v
		}
		resp, err := hc.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s: %s", url, resp.Status, body)
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("apiservertest: %s not ready after %v: %v%s", p.name, startTimeout, last, p.tail())
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("apiservertest: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
