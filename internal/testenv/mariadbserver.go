package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/loopback"
)

// MariaDBProcess is a mariadbd of one test's own, on a port of 127.0.0.1 that loopback
// reserves, with a fresh data directory, for tests that must freeze or kill the database (never
// the shared one). root has no password. It is killed when the test ends.
type MariaDBProcess struct {
	Addr string

	t   testing.TB
	dir string
	process
}

// mariaDBBin finds name on PATH or in /usr/sbin (where Debian puts mariadbd, off a user's
// PATH), failing t with how to install it.
func mariaDBBin(t testing.TB, name string) string {
	t.Helper()
	if bin, err := exec.LookPath(name); err == nil {
		return bin
	}
	if bin := filepath.Join("/usr/sbin", name); fileExists(bin) {
		return bin
	}
	t.Fatalf("this test starts its own MariaDB server, and there is no %s: install it "+
		"(Debian/Ubuntu: apt-get install --no-install-recommends mariadb-server)", name)
	return ""
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// StartMariaDB initialises a data directory with mariadb-install-db, starts mariadbd on it and
// waits until it answers (about a second).
func StartMariaDB(t testing.TB) *MariaDBProcess {
	t.Helper()
	install, server := mariaDBBin(t, "mariadb-install-db"), mariaDBBin(t, "mariadbd")
	// Not t.TempDir(): the Unix socket's path must stay under about 100 bytes.
	dir, err := os.MkdirTemp("", "seckill-mariadb-")
	if err != nil {
		t.Fatalf("MariaDB data directory: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	asUser := []string{}
	if os.Geteuid() == 0 {
		asUser = []string{"--user=root"} // mariadbd refuses to run as root without it
	}
	// A temporary directory of its own, not /tmp: a mariadbd deletes the temporary tables
	// ("#sql…" files) it finds in its tmpdir as it starts, so a server of another test
	// package starting meanwhile deleted those of this one's mariadb-install-db, whose
	// bootstrap then failed ("Unknown table 'mysql.tmp_proxies_priv'", a CI run, two packages
	// each starting a MariaDB of their own).
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatalf("MariaDB temporary directory: %v", err)
	}
	args := append([]string{"--no-defaults", "--datadir=" + filepath.Join(dir, "data"), "--tmpdir=" + tmp,
		"--auth-root-authentication-method=normal", "--skip-test-db"}, asUser...)
	if out, err := exec.Command(install, args...).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	p := &MariaDBProcess{t: t, dir: dir}
	t.Cleanup(p.kill)
	err = onFreePort(0, func(addr string) error {
		p.Addr = addr
		_, port, _ := net.SplitHostPort(addr)
		cmd := exec.Command(server, append([]string{"--no-defaults", "--datadir=" + filepath.Join(dir, "data"), "--tmpdir=" + tmp,
			"--bind-address=127.0.0.1", "--port=" + port, "--socket=" + filepath.Join(dir, "sock"),
			"--pid-file=" + filepath.Join(dir, "pid"), "--log-error=" + filepath.Join(dir, "error.log"),
			"--skip-log-bin", "--innodb-buffer-pool-size=32M", "--max-connections=200"}, asUser...)...)
		return p.start(cmd)
	})
	if err != nil {
		t.Fatalf("start mariadbd: %v", err)
	}
	return p
}

// DSN returns a DSN of the server's root user for the database name (empty: none).
func (p *MariaDBProcess) DSN(name string) string {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "tcp", p.Addr, name
	return cfg.FormatDSN()
}

// CreateDatabase creates the database name and returns its DSN.
func (p *MariaDBProcess) CreateDatabase(name string) string {
	p.t.Helper()
	db, err := sql.Open("mysql", p.DSN(""))
	if err != nil {
		p.t.Fatalf("open MariaDB: %v", err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		p.t.Fatalf("create database %s: %v", name, err)
	}
	return p.DSN(name)
}

// Freeze stops the server (SIGSTOP): it keeps its port and the kernel still accepts
// connections, but it answers nothing, as a hung server does. Thaw resumes it.
func (p *MariaDBProcess) Freeze() { p.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server (SIGCONT).
func (p *MariaDBProcess) Thaw() { p.signal(syscall.SIGCONT) }

func (p *MariaDBProcess) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.process.signal(sig); err != nil {
		p.t.Fatalf("signal mariadbd on %s: %v", p.Addr, err)
	}
}

func (p *MariaDBProcess) start(cmd *exec.Cmd) error {
	// A try on a port found taken left its complaint in the log: the next try's own counts.
	_ = os.Remove(filepath.Join(p.dir, "error.log"))
	if err := p.run(cmd); err != nil {
		return err
	}
	db, err := sql.Open("mysql", p.DSN(""))
	if err != nil {
		p.kill()
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		select {
		case err := <-p.exited():
			p.exited() <- err
			p.cmd = nil
			log := filepath.Join(p.dir, "error.log")
			return inUse(fmt.Errorf("mariadbd on %s exited: %v (log: %s)", p.Addr, err, log), log)
		case <-ctx.Done():
			p.kill()
			return fmt.Errorf("mariadbd on %s does not answer: %w (log: %s)", p.Addr, ctx.Err(), filepath.Join(p.dir, "error.log"))
		case <-time.After(20 * time.Millisecond):
		}
		// The data directory tells our server from another that took the port first.
		var pidDir string
		if db.QueryRowContext(ctx, "SELECT @@datadir").Scan(&pidDir) == nil {
			if filepath.Clean(pidDir) == filepath.Join(p.dir, "data") {
				return nil
			}
			p.kill()
			return fmt.Errorf("%w: another server answers on %s", loopback.ErrInUse, p.Addr)
		}
	}
}
