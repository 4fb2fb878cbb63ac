// Package natstest runs an embedded nats-server for natsbridge's tests,
// benchmarks and demo: loopback only, a random port, JetStream with a file
// store in a directory the caller owns.
package natstest

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Config says how to run the server. The zero value: no auth, the default
// max_payload (1 MiB), JetStream in a fresh temporary directory is the
// caller's to give in StoreDir.
type Config struct {
	StoreDir   string // JetStream file store; required
	User, Pass string // if set, clients must authenticate
	MaxPayload int32  // 0: the server's default (1 MiB)
	Port       int    // 0: a random free port
}

// Server is a running embedded server that can be stopped and started
// again on the same port with the same store (a restart).
type Server struct {
	cfg Config
	srv *server.Server
}

// Start runs a server and waits until it accepts connections.
func Start(cfg Config) (*Server, error) {
	if cfg.StoreDir == "" {
		return nil, fmt.Errorf("natstest: StoreDir is required")
	}
	s := &Server{cfg: cfg}
	if err := s.start(); err != nil {
		return nil, err
	}
	s.cfg.Port = s.srv.Addr().(*net.TCPAddr).Port
	return s, nil
}

func (s *Server) start() error {
	port := s.cfg.Port
	if port == 0 {
		port = -1 // random
	}
	opts := &server.Options{
		Host:      "127.0.0.1",
		Port:      port,
		NoLog:     true,
		NoSigs:    true,
		JetStream: true,
		StoreDir:  s.cfg.StoreDir,
		Username:  s.cfg.User,
		Password:  s.cfg.Pass,
		// No HTTP monitoring, no cluster: nothing but the client port.
		MaxPayload: s.cfg.MaxPayload,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("natstest: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(20 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fmt.Errorf("natstest: server not ready")
	}
	s.srv = srv
	return nil
}

// URL is the address clients connect to (nats://127.0.0.1:port).
func (s *Server) URL() string {
	return "nats://127.0.0.1:" + strconv.Itoa(s.cfg.Port)
}

// Stop shuts the server down and waits until it has.
func (s *Server) Stop() {
	if s.srv == nil {
		return
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.srv = nil
}

// Restart stops the server and starts a new one on the same port and
// store, after pause (clients see a disconnect and reconnect).
func (s *Server) Restart(pause time.Duration) error {
	s.Stop()
	time.Sleep(pause)
	var err error
	// The port can stay in TIME_WAIT-like use for a moment: try a few times.
	for range 50 {
		if err = s.start(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// Running is the server's handle, nil while stopped.
func (s *Server) Running() *server.Server { return s.srv }
