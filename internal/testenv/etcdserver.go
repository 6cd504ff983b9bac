package testenv

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// EtcdProcess is an etcd of one test's own on free ports of 127.0.0.1, for tests that must
// freeze it (never the shared one). It is killed when the test ends.
type EtcdProcess struct {
	Addr string // the client address

	t testing.TB
	process
}

// StartEtcd starts an etcd for t, a single member with its data in a temporary directory,
// and waits until it reports itself healthy. It fails t, with how to install one, when there
// is no etcd binary on PATH.
func StartEtcd(t testing.TB) *EtcdProcess {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatalf("this test starts its own etcd, and there is none on PATH: install it "+
			"(Debian/Ubuntu: apt-get install --no-install-recommends etcd-server; scripts/services.sh up etcd does) (%v)", err)
	}
	p := &EtcdProcess{t: t}
	t.Cleanup(p.kill)
	dir := t.TempDir()
	err = onFreePort(0, func(client string) error {
		peer, err := freeAddr()
		if err != nil {
			return err
		}
		log, err := os.Create(filepath.Join(dir, "etcd.log"))
		if err != nil {
			return err
		}
		defer log.Close()
		cmd := exec.Command(bin, "--name", "test", "--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", "http://"+client, "--advertise-client-urls", "http://"+client,
			"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
			"--initial-cluster", "test=http://"+peer)
		cmd.Stdout, cmd.Stderr = log, log
		if err := p.run(cmd); err != nil {
			return err
		}
		if err := waitHealthy(client, p.exited()); err != nil {
			p.kill()
			return inUse(err, log.Name())
		}
		p.Addr = client
		return nil
	})
	if err != nil {
		t.Fatalf("start etcd (log in %s): %v", dir, err)
	}
	return p
}

// Freeze stops the server (SIGSTOP): it keeps its connections and answers nothing.
func (p *EtcdProcess) Freeze() { p.signal(syscall.SIGSTOP) }

// Thaw continues a frozen server (SIGCONT).
func (p *EtcdProcess) Thaw() { p.signal(syscall.SIGCONT) }

func (p *EtcdProcess) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.process.signal(sig); err != nil {
		p.t.Fatalf("etcd: %v", err)
	}
}

// freeAddr is a free 127.0.0.1 address at the time of the call.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitHealthy polls etcd's /health at addr for up to 20 s, and gives up at once if the
// process exits.
func waitHealthy(addr string, exited chan error) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("etcd exited: %v", err)
		default:
		}
		if resp, err := client.Get("http://" + addr + "/health"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if strings.Contains(string(body), `"health":"true"`) {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("etcd at %s not healthy within 20s", addr)
}
