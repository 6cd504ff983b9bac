package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/seckill/seckill/internal/loopback"
)

// process is a server binary a test runs: started, signalled (frozen, thawed) and killed.
type process struct {
	cmd    *exec.Cmd
	waited chan error // the result of Wait, put back by whoever reads it
}

// run starts cmd and waits for it in the background.
func (p *process) run(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	p.cmd, p.waited = cmd, make(chan error, 1)
	go func() { p.waited <- cmd.Wait() }()
	return nil
}

// exited returns the channel that yields the exit once the process has ended; the caller
// who reads it must put the value back.
func (p *process) exited() chan error { return p.waited }

// signal sends sig to the running process. With SIGSTOP it returns once every thread of the
// process has stopped: the kernel stops them only when one of them runs and takes the signal,
// and until then the others go on answering (a MariaDB "frozen" on a loaded machine answered a
// read 1 ms after its SIGSTOP).
func (p *process) signal(sig syscall.Signal) error {
	if p.cmd == nil {
		return fmt.Errorf("%v: not running", sig)
	}
	if err := p.cmd.Process.Signal(sig); err != nil || sig != syscall.SIGSTOP {
		return err
	}
	tasks := fmt.Sprintf("/proc/%d/task", p.cmd.Process.Pid)
	deadline := time.Now().Add(stopBound)
	for {
		stopped, err := allStopped(tasks)
		switch {
		case err != nil:
			return fmt.Errorf("%v: %w", sig, err)
		case stopped:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("%v: pid %d not stopped within %s", sig, p.cmd.Process.Pid, stopBound)
		}
		time.Sleep(time.Millisecond)
	}
}

// stopBound bounds the wait for a process's threads to stop after SIGSTOP.
const stopBound = 10 * time.Second

// allStopped reports whether every thread in tasks (/proc/PID/task) is stopped: state T (or
// t, traced) in its stat.
func allStopped(tasks string) (bool, error) {
	ts, err := os.ReadDir(tasks)
	if err != nil {
		return false, err
	}
	for _, t := range ts {
		b, err := os.ReadFile(filepath.Join(tasks, t.Name(), "stat"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // the thread ended
		}
		if err != nil {
			return false, err
		}
		// The state follows the command name, in parentheses that may hold any character.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false, fmt.Errorf("%s/stat: unexpected %q", t.Name(), b)
		}
		if st := b[i+2]; st != 'T' && st != 't' {
			return false, nil
		}
	}
	return true, nil
}

// kill ends the process (SIGKILL, which ends a stopped one too), if any, and waits for it.
func (p *process) kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	err := <-p.waited
	p.waited <- err
	p.cmd = nil
}

// inUse returns err wrapping loopback.ErrInUse when the server's log says it could not listen
// because its port was taken (by a process that does not reserve ports through loopback), so
// that another port is tried; any other failure is final.
func inUse(err error, log string) error {
	b, _ := os.ReadFile(log)
	if bytes.Contains(bytes.ToLower(b), []byte("address already in use")) {
		return fmt.Errorf("%w: %w", loopback.ErrInUse, err)
	}
	return err
}
