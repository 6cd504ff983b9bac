package lock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// errNodeTimeout marks a node that did not answer within the node timeout.
var errNodeTimeout = errors.New("no answer within the node timeout")

// nodeResult is one node's answer to one step of the algorithm.
type nodeResult struct {
	ok  bool // the step took effect: the key was set, or deleted
	err error
}

// each runs op on every node in parallel and returns their answers, index by index, after
// at most timeout: a node still silent then, or when ctx ends, is an error. op gets a
// context with that timeout, but a client that ignores it (go-redis without
// ContextTimeoutEnabled) cannot hold the caller: its goroutine is left to finish alone and
// its late answer is dropped.
func (s *RedLocks) each(ctx context.Context, timeout time.Duration, op func(ctx context.Context, i int, c RedisClient) (bool, error)) []nodeResult {
	type answer struct {
		i int
		nodeResult
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	answers := make(chan answer, len(s.nodes)) // buffered: a late sender never blocks
	for i, c := range s.nodes {
		go func() {
			ok, err := op(ctx, i, c)
			answers <- answer{i, nodeResult{ok, err}}
		}()
	}
	results := make([]nodeResult, len(s.nodes))
	pending := make([]bool, len(s.nodes))
	for i := range pending {
		pending[i] = true
	}
	for range s.nodes {
		select {
		case a := <-answers:
			results[a.i], pending[a.i] = a.nodeResult, false
		case <-ctx.Done():
			cause := errNodeTimeout
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				cause = ctx.Err()
			}
			for i, p := range pending {
				if p {
					results[i].err = cause
				}
			}
			return results
		}
	}
	return results
}

// tally counts the nodes where a step took effect and those that answered at all (a
// negative answer, such as SET NX finding the key, is an answer), and collects the errors.
func tally(results []nodeResult) (took, answered int, errs []error) {
	for i, r := range results {
		switch {
		case r.err != nil:
			errs = append(errs, fmt.Errorf("node %d: %w", i, r.err))
		case r.ok:
			took++
			answered++
		default:
			answered++
		}
	}
	return took, answered, errs
}
