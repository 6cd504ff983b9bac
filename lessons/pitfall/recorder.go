package pitfall

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/scripts/lua"
)

// recorder is the go-redis hook that writes every command an actor sends, and its reply,
// into the timeline. It runs on the calling goroutine, so it knows which actor sent it.
type recorder struct {
	scene *Scene
	label string // the participant: "Redis", "primary", "replica"
	// background names the sender of a command from a goroutine that is no actor's (see
	// withBackground); "script" when empty.
	background string
}

// who names the sender of a command sent with ctx.
func (r *recorder) who(ctx context.Context) string {
	if n := r.scene.actorOf(ctx); n != "script" || r.background == "" {
		return n
	}
	return r.background
}

// script is a Lua script the timeline shows by name instead of its SHA1.
type script struct {
	name    string
	deletes bool // a reply of 1 means the script deleted KEYS[1]
}

var (
	scriptsMu sync.Mutex
	scripts   = map[string]script{}
)

// nameScript registers src under name for the timeline and returns it as a redis.Script.
func nameScript(name, src string, deletes bool) *redis.Script {
	sum := sha1.Sum([]byte(src))
	scriptsMu.Lock()
	scripts[hex.EncodeToString(sum[:])] = script{name: name, deletes: deletes}
	scriptsMu.Unlock()
	return redis.NewScript(src)
}

// The library's scripts the lessons' locks run, by the names the timeline shows.
const (
	reentrantLockName   = "reentrant_lock.lua"
	reentrantUnlockName = "reentrant_unlock.lua"
	renewName           = "renew.lua"
)

var (
	_ = nameScript("unlock.lua", lua.Unlock, true)
	_ = nameScript(reentrantLockName, lua.ReentrantLock, false)
	_ = nameScript(reentrantUnlockName, lua.ReentrantUnlock, false)
	_ = nameScript(renewName, lua.Renew, false)
)

func scriptBySHA(sha string) (script, bool) {
	scriptsMu.Lock()
	defer scriptsMu.Unlock()
	s, ok := scripts[sha]
	return s, ok
}

// Commands the timeline leaves out: connection set-up, not part of any lock.
var quiet = map[string]bool{"hello": true, "ping": true, "client": true, "select": true, "auth": true}

func (r *recorder) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (r *recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil && cmd.Err() == nil {
			cmd.SetErr(err) // go-redis sets it after the hooks; the timeline needs it now
		}
		if quiet[cmd.Name()] || isNoScript(err) || isNoScript(cmd.Err()) {
			return err
		}
		r.scene.recordCommand(r.label, r.who(ctx), []redis.Cmder{cmd})
		return err
	}
}

func (r *recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		r.scene.recordCommand(r.label, r.who(ctx), cmds)
		return err
	}
}

func isNoScript(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") }

// recordCommand appends one event for cmds (one command, or a MULTI … EXEC block) and
// interprets the replies: who took a key, whose lock a delete removed, who was refused.
func (s *Scene) recordCommand(label, actor string, cmds []redis.Cmder) {
	var what, reply []string
	var notes []string
	refused := false
	for _, cmd := range cmds {
		s.aliasRedLockValue(cmd)
		name := cmd.Name()
		what = append(what, formatArgs(cmd.Args()))
		if name == "multi" || name == "exec" {
			continue
		}
		reply = append(reply, formatReply(cmd))
		n, key := s.interpret(label, actor, cmd)
		if n != "" {
			notes = append(notes, n)
		}
		if strings.HasPrefix(n, "refused") {
			refused = true
		}
		_ = key
	}
	s.record(Event{
		Actor: actor, Kind: KindCommand, To: label,
		What: strings.Join(what, "; "), Reply: strings.Join(reply, ", "),
		Note: strings.Join(notes, "; "), Refused: refused,
	})
}

// interpret explains one command's reply and keeps track of which actor last wrote each key
// on each server (label).
func (s *Scene) interpret(label, actor string, cmd redis.Cmder) (note, key string) {
	args := cmd.Args()
	if len(args) < 2 {
		return "", ""
	}
	key = label + "\x00" + fmt.Sprint(args[1])
	err := cmd.Err()
	switch cmd.Name() {
	case "set":
		nx := hasArg(args, "nx")
		if b, ok := cmd.(*redis.BoolCmd); ok && err == nil && !b.Val() {
			err = redis.Nil // SetNX reports a NX miss as false, Redis as (nil)
		}
		switch {
		case err == nil:
			s.setHolder(key, actor)
			if nx {
				return actor + " takes the lock", key
			}
		case errors.Is(err, redis.Nil) && nx:
			return s.refusal(actor, key), key
		}
	case "setnx":
		if v, ok := cmd.(*redis.Cmd); ok && err == nil {
			if n, _ := v.Int64(); n == 1 {
				s.setHolder(key, actor)
				return actor + " takes the lock", key
			}
			return s.refusal(actor, key), key
		}
	case "getset":
		if err == nil || errors.Is(err, redis.Nil) {
			s.setHolder(key, actor)
		}
	case "del", "unlink":
		if v, ok := cmd.(*redis.IntCmd); ok && err == nil && v.Val() > 0 {
			return s.deleted(actor, key), key
		}
	case "evalsha", "eval":
		if len(args) < 4 {
			return "", ""
		}
		key = label + "\x00" + fmt.Sprint(args[3])
		sc, _ := scriptBySHA(fmt.Sprint(args[1]))
		if cmd.Name() == "eval" {
			sum := sha1.Sum([]byte(fmt.Sprint(args[1])))
			sc, _ = scriptBySHA(hex.EncodeToString(sum[:]))
		}
		v, ok := cmd.(*redis.Cmd)
		if !ok || err != nil {
			break
		}
		if sc.name == reentrantLockName || sc.name == reentrantUnlockName {
			return s.interpretReentrant(sc.name, actor, key, v), key
		}
		n, _ := v.Int64()
		switch {
		case sc.deletes && n == 1:
			return s.deleted(actor, key), key
		case sc.deletes:
			return "not " + actor + "'s lock: nothing deleted", key
		case sc.name == renewName && n == 1:
			return "lease renewed", key
		case sc.name == renewName:
			return "not renewed: the lease was lost", key
		}
	}
	return "", key
}

// interpretReentrant explains a reply of lock.ReentrantLock's scripts: reentrant_lock.lua
// answers {hold count, token} to its holder and {-PTTL, 0} to anyone else;
// reentrant_unlock.lua answers -1 (not held), the holds left, or 0 when it deleted the hash.
func (s *Scene) interpretReentrant(script, actor, key string, v *redis.Cmd) string {
	if script == reentrantUnlockName {
		switch n, _ := v.Int64(); {
		case n == 0:
			return s.deleted(actor, key)
		case n > 0:
			return fmt.Sprintf("%s drops one hold: still held (hold count %d)", actor, n)
		default:
			return "not " + actor + "'s lock: nothing released"
		}
	}
	r, err := v.Int64Slice()
	switch {
	case err != nil || len(r) != 2:
		return ""
	case r[0] == 1:
		s.setHolder(key, actor)
		return actor + " takes the lock"
	case r[0] > 1:
		return fmt.Sprintf("%s re-enters (hold count %d)", actor, r[0])
	default:
		return s.refusal(actor, key)
	}
}

// refusal describes a refused lock request, noting when the refusing lock is the
// requester's own.
func (s *Scene) refusal(actor, key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holder[key] == actor {
		return "refused: " + actor + " already holds it"
	}
	return "refused"
}

func (s *Scene) setHolder(key, actor string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holder[key] = actor
}

// deleted describes a successful delete of key by actor: its own lock, or someone else's.
func (s *Scene) deleted(actor, key string) string {
	s.mu.Lock()
	owner := s.holder[key]
	delete(s.holder, key)
	s.mu.Unlock()
	switch {
	case owner == actor || owner == "":
		return actor + " releases its lock"
	case strings.HasPrefix(actor, owner+"."):
		return actor + " releases " + owner + "'s lock, which it works under"
	default:
		return actor + " deletes " + owner + "'s lock"
	}
}

func hasArg(args []any, want string) bool {
	for _, a := range args[2:] {
		if strings.EqualFold(fmt.Sprint(a), want) {
			return true
		}
	}
	return false
}

var keywords = map[string]bool{"nx": true, "xx": true, "ex": true, "px": true, "pxat": true, "exat": true, "get": true, "keepttl": true}

// formatArgs prints a command as redis-cli would show it, with scripts named.
func formatArgs(args []any) string {
	parts := make([]string, 0, len(args))
	for i, a := range args {
		s := fmt.Sprint(a)
		if i == 0 || (i > 1 && keywords[strings.ToLower(s)]) {
			s = strings.ToUpper(s)
		}
		if i == 1 && (parts[0] == "EVALSHA" || parts[0] == "EVAL") {
			if parts[0] == "EVAL" {
				sum := sha1.Sum([]byte(s))
				s = hex.EncodeToString(sum[:])
			}
			if sc, ok := scriptBySHA(s); ok {
				s = sc.name
			}
			parts[0] = "EVAL"
		}
		parts = append(parts, s)
	}
	// Drop numkeys from EVAL: "EVAL unlock.lua 1 key arg" reads as "EVAL unlock.lua key arg".
	if len(parts) > 2 && parts[0] == "EVAL" {
		parts = append(parts[:2], parts[3:]...)
	}
	return strings.Join(parts, " ")
}

// formatReply prints a reply as redis-cli would.
func formatReply(cmd redis.Cmder) string {
	err := cmd.Err()
	if errors.Is(err, redis.Nil) {
		return "(nil)"
	}
	var netErr *net.OpError
	switch {
	case errors.Is(err, errReplyLost):
		return "error: connection reset, reply lost"
	case errors.As(err, &netErr):
		// The exact words (refused, reset, EOF) depend on the pool's state; the fact doesn't.
		return "error: connection failed"
	case err != nil:
		return "error: " + err.Error()
	}
	switch c := cmd.(type) {
	case *redis.BoolCmd:
		if c.Name() == "set" {
			if !c.Val() {
				return "(nil)"
			}
			return "OK"
		}
		if c.Val() {
			return "1"
		}
		return "0"
	case *redis.StatusCmd:
		return c.Val()
	case *redis.IntCmd:
		return fmt.Sprint(c.Val())
	case *redis.StringCmd:
		return fmt.Sprintf("%q", c.Val())
	case *redis.Cmd:
		switch v := c.Val().(type) {
		case string:
			if v == "OK" {
				return v
			}
			return fmt.Sprintf("%q", v)
		default:
			return fmt.Sprint(v)
		}
	default:
		return strings.TrimSpace(strings.TrimPrefix(cmd.String(), formatArgs(cmd.Args())))
	}
}
