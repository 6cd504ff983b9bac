package pitfall

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Scene is one run of one pitfall variant: the actors, the Redis server they share and
// the timeline they write. The script (the pitfall's play function) is the only goroutine
// that moves the scene forward: it resumes one actor at a time and waits until that actor
// parks at a named point or returns, so the interleaving is the script's, not the
// scheduler's.
type Scene struct {
	ctx context.Context
	srv *server
	ns  string // key namespace: "" on a fresh embedded server, unique on a shared real one
	env Env

	db      *OrderDB   // pitfalls 1 and 8
	storage *Storage   // pitfall 7
	t0      time.Time  // the server's clock when the script started it (pitfalls 4, 10)
	tokens  int        // tokens drawn so far
	cluster *cluster   // pitfall 11's primary and replica
	herd    *herdStats // pitfall 17's counts
	// teardown runs after the actors have ended, last added first: the lessons' own
	// backends (RedLock's nodes, ZooKeeper clients, a database).
	teardown []func() error

	mu      sync.Mutex
	events  []Event
	actors  map[string]*Actor
	order   []*Actor          // in creation order; index+1 names the goroutine alias
	byGID   map[uint64]string // goroutine id → actor name, for the command log
	holder  map[string]string // key → actor whose write last set it
	aliases [][2]string       // raw → shown, applied when rendering
	clients []*redis.Client
}

// errCrashed ends an actor's goroutine when the script crashes it.
var errCrashed = errors.New("pitfall: actor crashed")

// Actor is one client of the scenario (a request on a service instance, a watchdog, a
// worker): one goroutine, one Redis connection pool, one name in the timeline.
type Actor struct {
	Name    string
	Process string        // process id used in lock values (readable, e.g. "app1")
	Redis   *redis.Client // every command sent through it is recorded as this actor's

	scene  *Scene
	resume chan string // script → actor: run until this point ("" = to the end)
	parked chan string // actor → script: the point reached, or doneMark
	target string      // written by the actor's goroutine only
	done   atomic.Bool // the goroutine has returned
	gid    uint64
	err    error
}

const (
	doneMark  = "\x00done"
	crashMark = "\x00crash"
	stopMark  = "\x00stop"
)

// ActorOption configures an actor created by Scene.Go.
type ActorOption func(*actorConfig)

type actorConfig struct {
	process string
	addr    string
	label   string
	network string
	hook    redis.Hook
	// background names the commands the actor's client sends from goroutines that are no
	// actor's and carry no actor's context: the lock library's own (a watchdog).
	background string
}

// WithProcess sets the process id the actor's locks put in their values (default: its name).
func WithProcess(p string) ActorOption { return func(c *actorConfig) { c.process = p } }

// withServer points the actor's client at another Redis, shown as label in the timeline.
func withServer(network, addr, label string) ActorOption {
	return func(c *actorConfig) { c.network, c.addr, c.label = network, addr, label }
}

// withBackground shows the commands the actor's client sends from the lock library's own
// goroutines (a lock.Client's watchdog) as name's.
func withBackground(name string) ActorOption { return func(c *actorConfig) { c.background = name } }

// withFault adds a fault-injecting hook (after the recording one) to the actor's client.
func withFault(h redis.Hook) ActorOption { return func(c *actorConfig) { c.hook = h } }

func newScene(ctx context.Context, srv *server, ns string) *Scene {
	return &Scene{
		ctx: ctx, srv: srv, ns: ns,
		actors: make(map[string]*Actor),
		byGID:  make(map[uint64]string),
		holder: make(map[string]string),
	}
}

// LockName returns the name to give a lock: the scene's namespace, then name.
func (s *Scene) LockName(name string) string { return s.ns + name }

// Go creates actor name running fn in its own goroutine. The actor does not start until the
// script resumes it with Until or Finish. Actors may create actors (a handler spawning a
// worker); names must be unique within the scene.
func (s *Scene) Go(name string, fn func(ctx context.Context, a *Actor) error, opts ...ActorOption) *Actor {
	cfg := actorConfig{process: name, addr: s.srv.addr, network: s.srv.network, label: "Redis"}
	for _, o := range opts {
		o(&cfg)
	}
	c := redis.NewClient(&redis.Options{
		Network: cfg.network, Addr: cfg.addr, DisableIdentity: true, Protocol: 2,
		PoolSize: 2, MaxRetries: -1,
	})
	a := &Actor{
		Name: name, Process: cfg.process, Redis: c, scene: s,
		resume: make(chan string), parked: make(chan string),
	}
	c.AddHook(&recorder{scene: s, label: cfg.label, background: cfg.background})
	if cfg.hook != nil {
		c.AddHook(cfg.hook)
	}
	s.mu.Lock()
	if _, dup := s.actors[name]; dup {
		s.mu.Unlock()
		panic("pitfall: duplicate actor " + name)
	}
	s.actors[name] = a
	s.order = append(s.order, a)
	s.clients = append(s.clients, c)
	s.mu.Unlock()

	go a.main(fn)
	<-a.parked // the actor has recorded its goroutine id and waits for the script
	return a
}

func (a *Actor) main(fn func(ctx context.Context, a *Actor) error) {
	a.gid = readGoroutineID()
	a.scene.mu.Lock()
	a.scene.byGID[a.gid] = a.Name
	a.scene.mu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			a.err = fmt.Errorf("actor %s panicked: %v", a.Name, r)
		}
		a.parked <- doneMark
	}()
	a.parked <- "start"
	a.target = <-a.resume
	if a.target == crashMark || a.target == stopMark {
		return
	}
	err := fn(context.WithValue(a.scene.ctx, actorKey{}, a.Name), a)
	if err != nil && !errors.Is(err, errCrashed) {
		a.err = fmt.Errorf("actor %s: %w", a.Name, err)
	}
}

// Point is a named pause point: the actor stops here when the script asked it to run until
// this point, and goes on when the script resumes it. If the script crashes the actor while
// it waits here, Point does not return: the goroutine ends without running the actor's
// remaining code, as a process that dies runs nothing more.
func (a *Actor) Point(name string) {
	if a.target != name {
		return
	}
	a.parked <- name
	a.target = <-a.resume
	if a.target == crashMark || a.target == stopMark {
		runtime.Goexit()
	}
}

// actor returns the actor called name; the script refers to actors by name.
func (s *Scene) actor(name string) *Actor {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.actors[name]
	if !ok {
		panic("pitfall: no actor " + name)
	}
	return a
}

// Has reports whether an actor called name exists (it may have been spawned by another).
func (s *Scene) Has(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.actors[name]
	return ok
}

// Until resumes actor name and waits until it parks at point or returns. It reports whether
// the actor reached point (false: it returned first, or had already returned).
func (s *Scene) Until(name, point string) bool {
	a := s.actor(name)
	if a.done.Load() {
		return false
	}
	a.resume <- point
	got := <-a.parked
	if got == doneMark {
		a.done.Store(true)
		return false
	}
	return got == point
}

// Resume lets actor name run until point without waiting for it: the actor blocks in a lock
// that only another actor's release will grant. Await collects it.
func (s *Scene) Resume(name, point string) {
	a := s.actor(name)
	if !a.done.Load() {
		a.resume <- point
	}
}

// Await waits until actor name, resumed by Resume, parks at its point (true) or returns.
func (s *Scene) Await(name string) bool {
	a := s.actor(name)
	if a.done.Load() {
		return false
	}
	if got := <-a.parked; got != doneMark {
		return true
	}
	a.done.Store(true)
	return false
}

// Finish resumes actor name and waits until it returns.
func (s *Scene) Finish(name string) { s.Until(name, doneMark) }

// Crash ends the parked actor name as a crash would: it never runs another line, so it
// never unlocks. The timeline records the crash; the actor leaves any critical section.
func (s *Scene) Crash(name string) {
	s.end(name, crashMark)
	s.record(Event{Actor: name, Kind: KindCrash, What: "crashes: the process dies and never unlocks"})
}

// Stop ends the parked actor name without a crash record (a watchdog that is cancelled).
func (s *Scene) Stop(name, why string) {
	s.end(name, stopMark)
	if why != "" {
		s.record(Event{Actor: name, Kind: KindNote, What: why})
	}
}

func (s *Scene) end(name, mark string) {
	a := s.actor(name)
	if a.done.Load() {
		return
	}
	a.resume <- mark
	<-a.parked
	a.done.Store(true)
}

// close ends every actor still parked and closes the clients. It returns the first error
// an actor reported.
func (s *Scene) close() error {
	s.mu.Lock()
	actors := append([]*Actor(nil), s.order...)
	s.mu.Unlock()
	var errs []error
	for _, a := range actors {
		s.end(a.Name, stopMark)
		if a.err != nil {
			errs = append(errs, a.err)
		}
	}
	for _, c := range s.clients {
		_ = c.Close()
	}
	return errors.Join(errs...)
}

// Enter records that the actor starts the work the lock protects.
func (a *Actor) Enter() {
	a.scene.record(Event{Actor: a.Name, Kind: KindEnter, What: "enters the critical section"})
}

// Exit records that the actor leaves the critical section.
func (a *Actor) Exit() {
	a.scene.record(Event{Actor: a.Name, Kind: KindExit, What: "leaves the critical section"})
}

// Note records something the actor did or concluded that is not a command.
func (a *Actor) Note(format string, args ...any) {
	a.scene.record(Event{Actor: a.Name, Kind: KindNote, What: fmt.Sprintf(format, args...)})
}

// Did records an operation on a participant other than Redis (a database, a storage, an
// in-process lock) with its reply and what it means.
func (a *Actor) Did(to, what, reply, note string) {
	a.scene.record(Event{Actor: a.Name, Kind: KindOp, To: to, What: what, Reply: reply, Note: note})
}

// Refused records that the actor was refused a lock that it did not ask Redis for (an
// in-process lock).
func (a *Actor) Refused(to, what, reply string) {
	a.scene.record(Event{Actor: a.Name, Kind: KindOp, To: to, What: what, Reply: reply, Note: "refused", Refused: true})
}

// Observed records something the script saw at a participant: a watch notification that
// reached an actor, a row in a table.
func (s *Scene) Observed(actor, to, what, reply, note string) {
	s.record(Event{Actor: actor, Kind: KindOp, To: to, What: what, Reply: reply, Note: note})
}

// Note records a scene-level fact (time passing, a server failing).
func (s *Scene) Note(format string, args ...any) {
	s.record(Event{Kind: KindTime, What: fmt.Sprintf(format, args...)})
}

// Alias makes the rendered timeline show raw (a random token, a run-specific value) as shown.
func (s *Scene) Alias(raw, shown string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.aliases = append(s.aliases, [2]string{raw, shown})
}

func (s *Scene) record(e Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.T = len(s.events) + 1
	s.events = append(s.events, e)
}

// actorKey is the context key under which an actor's context carries its name.
type actorKey struct{}

// actorOf names the actor running on the calling goroutine, for the command recorder; on a
// goroutine that is no actor's, the actor whose context ctx derives from: a lock that sends
// its commands from goroutines of its own (a RedLock asks its nodes in parallel) works for
// the actor that called it.
func (s *Scene) actorOf(ctx context.Context) string {
	id := readGoroutineID()
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.byGID[id]; ok {
		return n
	}
	if n, ok := ctx.Value(actorKey{}).(string); ok {
		return n
	}
	return "script"
}

// timeline returns the recorded events with every run-specific string (namespace, goroutine
// ids, tokens, clock readings) replaced by a stable name, so that two runs of the same
// script print the same timeline.
func (s *Scene) timeline() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	repl := s.replacements()
	out := make([]Event, len(s.events))
	for i, e := range s.events {
		e.What, e.Reply, e.Note = repl.Replace(e.What), repl.Replace(e.Reply), repl.Replace(e.Note)
		out[i] = e
	}
	return out
}

func (s *Scene) replacements() *strings.Replacer {
	pairs := append([][2]string(nil), s.aliases...)
	procs := map[string]bool{}
	for _, a := range s.order {
		procs[a.Process] = true
	}
	for i, a := range s.order {
		g := strconv.FormatUint(a.gid, 10)
		for p := range procs {
			pairs = append(pairs, [2]string{p + "-" + g, p + "-g" + strconv.Itoa(i+1)})
		}
	}
	if s.ns != "" {
		pairs = append(pairs, [2]string{s.ns, ""})
	}
	// Longest first, so that one alias never eats part of a longer one.
	sort.SliceStable(pairs, func(i, j int) bool { return len(pairs[i][0]) > len(pairs[j][0]) })
	var old []string
	for _, p := range pairs {
		old = append(old, p[0], p[1])
	}
	return strings.NewReplacer(old...)
}
