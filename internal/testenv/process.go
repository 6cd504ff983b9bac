package testenv

import (
	"fmt"
	"os/exec"
	"syscall"
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

// signal sends sig to the running process.
func (p *process) signal(sig syscall.Signal) error {
	if p.cmd == nil {
		return fmt.Errorf("%v: not running", sig)
	}
	return p.cmd.Process.Signal(sig)
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
