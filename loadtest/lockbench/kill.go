package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// The kill test: a child process (this program again, with -child) takes a lock and says
// so; the parent SIGKILLs it and measures how long it then takes to get the lock itself,
// waiting the contestant's own way. Lease-based locks come back when the lease runs out;
// session-based ones when the server notices the session is gone.

// killKey is the key of c's kill test, the same in the child.
func (c contestant) killKey(e *env) string { return fmt.Sprintf("%skill-%d", e.prefix, c.idx) }

// childArgs are the flags that make the child see the same backends and keys.
func (e *env) childArgs(name string) []string {
	return []string{"-child", name,
		"-redis", e.redisAddr, "-redlock", strings.Join(e.redlockAddrs, ","),
		"-mysql", e.mysqlDSN, "-mysql-db", e.mysqlDB,
		"-zk", strings.Join(e.zkAddrs, ","), "-zk-root", e.zkRoot, "-zk-session", e.zkSession.String(),
		"-etcd", strings.Join(e.etcdAddrs, ","), "-prefix", e.prefix, "-kill-lease", e.killLease.String()}
}

// runChild is the child's side: take the key, print "held", and wait to be killed (at most
// a minute, should the parent be gone).
func runChild(ctx context.Context, e *env, c contestant) error {
	in, err := c.setup(ctx, e)
	if err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := in.acquire(actx, c.killKey(e)); err != nil {
		return err
	}
	fmt.Println("held")
	time.Sleep(time.Minute)
	return errors.New("not killed within a minute")
}

// killRecovery returns the time from SIGKILL of a holder to the parent's acquisition.
func (b bench) killRecovery(ctx context.Context, c contestant) (time.Duration, error) {
	e := *b.env
	e.lease = e.killLease
	in, err := c.setup(ctx, &e) // before the kill: setting up is not part of the wait
	if err != nil {
		return 0, err
	}
	defer in.close()
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, b.env.childArgs(c.name)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	held := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		held <- strings.TrimSpace(line) == "held"
	}()
	select {
	case ok := <-held:
		if !ok {
			_ = cmd.Wait()
			return 0, fmt.Errorf("child did not take the lock: %s", strings.TrimSpace(stderr.String()))
		}
	case <-time.After(40 * time.Second):
		return 0, errors.New("child did not take the lock within 40 s")
	}
	t0 := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		return 0, err
	}
	_ = cmd.Wait()
	actx, acancel := context.WithTimeout(ctx, 60*time.Second)
	defer acancel()
	release, err := in.acquire(actx, c.killKey(b.env))
	d := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("after %v: %w", d.Round(time.Millisecond), err)
	}
	return d, release(ctx)
}
