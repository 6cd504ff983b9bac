package pitfall

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// DocsHeader opens docs/pitfalls.md.
const DocsHeader = `# Lock pitfalls, run and watched failing

Every wrong Redis lock in the articles the project is built from (listed below), run as a
scripted interleaving of two to four clients against a real Redis protocol server, beside
the fix running the same script; then the lessons of the other backends (14-17): a RedLock
node that restarts empty, a ZooKeeper session that expires under a paused holder, a database
lock row left by a crashed holder, and the herd effect of watching the parent node. Each diagram below is generated from a recorded timeline
(` + "`t=`" + ` is logical time: the event's position in the run); a test keeps this file in sync
with what the runner produces:

    go test ./lessons/pitfall -run TestPitfallDocs -update   # rewrite this file

Run them yourself, on an embedded Redis (no server needed) or a real one:

    go run ./cmd/seckill pitfalls                 # all of them, failing and fixed
    go run ./cmd/seckill pitfalls plain-del       # one
    go run ./cmd/seckill pitfalls --redis 127.0.0.1:6379
    go run ./cmd/seckill pitfalls --list

How the runner keeps it deterministic: one goroutine per client, but only one runs at a time;
each stops at named pause points and goes on only when the script resumes it. Time moves only
when the script says so: miniredis FastForward on the embedded server; on a real Redis, a
short PX lease and waiting until the key is actually gone (PTTL/EXISTS polled as a condition,
never a guessed sleep). The failover pitfall starts its own primary and replica redis-server
processes, so it runs when a redis-server binary is available (on PATH, or
` + "`--redis-server-bin`" + `) and in ` + "`make test-integration`" + `.

The RedLock lesson runs on five embedded Redis servers (a node's crash and restart is a
server closed and a new one on its address), and in ` + "`make test-integration`" + ` also on five
redis-server processes killed with SIGKILL. The database lesson runs on the embedded SQLite,
and on MariaDB in the integration suite. The ZooKeeper lessons need a real ZooKeeper
(` + "`scripts/services.sh up zookeeper`" + `, or ` + "`--zookeeper ADDR`" + `); without one ` + "`seckill pitfalls`" + ` says
so and leaves them out (not run is not passed), and ` + "`make test-integration`" + ` runs them. Their
clients talk to ZooKeeper through a proxy the script controls: it freezes a paused client's
connection, expires a session at once by closing it with the session's id and password (what
the server does when the session timeout passes), and counts the watch notifications each
client receives, with a barrier (a ping of its own) before it reads them.

The locks are in lessons/pitfall, one file per pitfall; none of them is wired into the
service, and the lessons use package lock only as any of its users would.

A fix *holds* when its run shows neither the wrong lock's failure nor a lock that does no
work: the clients its script expects to get in do get in (the others are meant to be
refused), and the order lessons place the user's one order. A lock that refused everyone
would never let two in, and would still be no fix.

Each pitfall's **Source** names the article by number and the section by its heading:

| # | Article |
| --- | --- |
| 000 | 《Java 基于 Redis 实现分布式锁需要注意什么？》 (a local lock in front of a Redis lock, after Spring's RedisLockRegistry; failover) |
| 001 | 《分布式锁 — Redisson 全面解析！》 (Redisson's RLock, watchdog and fair lock) |
| 002 | 《Redis分布式锁实现》 (a Redis lock built and broken step by step) |
| 003 | 《优惠券秒杀（四）—— 分布式锁》 (hmdp's coupon seckill and its SimpleRedisLock) |
| 004 | an untitled article on the three ways to build a distributed lock (分布式锁一般有三种实现方式: database, Redis, ZooKeeper) |
`

// section markers delimit each pitfall's generated section, so that a section that cannot
// be regenerated here (failover, without redis-server) can be carried over unchanged.
func sectionStart(name string) string { return "<!-- pitfall:" + name + " -->" }
func sectionEnd(name string) string   { return "<!-- /pitfall:" + name + " -->" }

// DocSection renders one pitfall's section of docs/pitfalls.md from its runs.
func DocSection(p *Pitfall, results []Result) string {
	var b strings.Builder
	fmt.Fprintln(&b, sectionStart(p.Name))
	fmt.Fprintf(&b, "## %s. %s (`%s`)\n\n", p.Num, p.Title, p.Name)
	fmt.Fprintf(&b, "**Source:** %s\n\n", p.Source)
	fmt.Fprintf(&b, "**What goes wrong.** %s\n\n", p.Story)
	fmt.Fprintf(&b, "**The fix.** %s\n\n", p.Remedy)
	fmt.Fprintf(&b, "**Run it:** `go run ./cmd/seckill pitfalls %s`\n\n", p.Name)
	for _, r := range results {
		fmt.Fprintf(&b, "### %s: %s\n\n", r.Variant.Name, r.Variant.Label)
		fmt.Fprintf(&b, "Outcome: %s\n\n", Outcome(r))
		fmt.Fprintf(&b, "```mermaid\n%s```\n\n", Mermaid(r.Events))
	}
	fmt.Fprintln(&b, sectionEnd(p.Name))
	return b.String()
}

// Outcome is the line printed for a run: what the verdict says, and whether that is what the
// run had to show.
func Outcome(r Result) string {
	switch {
	case r.Variant.Wrong && r.Verdict.Violated:
		return "FAILS, as the articles say — " + r.Verdict.Outcome
	case !r.Variant.Wrong && !r.Verdict.Violated:
		return "holds — " + r.Verdict.Outcome
	case r.Variant.Wrong:
		return "UNEXPECTED: the wrong lock did not fail — " + r.Verdict.Outcome
	default:
		return "UNEXPECTED: the fix did not hold — " + r.Verdict.Outcome
	}
}

// Docs renders docs/pitfalls.md. sections maps a pitfall's name to its rendered section;
// a pitfall missing from it keeps its section from old (the current file), if it has one.
func Docs(sections map[string]string, old []byte) []byte {
	var b bytes.Buffer
	b.WriteString(DocsHeader)
	b.WriteString("\n## Contents\n\n")
	for _, p := range All() {
		fmt.Fprintf(&b, "- [%s. %s](#%s)\n", p.Num, p.Title, anchor(p))
	}
	b.WriteString("\n")
	for _, p := range All() {
		sec, ok := sections[p.Name]
		if !ok {
			sec = OldSection(old, p.Name)
		}
		b.WriteString(sec)
		b.WriteString("\n")
	}
	return b.Bytes()
}

// OldSection extracts pitfall name's section from an existing docs file ("" if absent).
func OldSection(old []byte, name string) string {
	s := string(old)
	i := strings.Index(s, sectionStart(name))
	j := strings.Index(s, sectionEnd(name))
	if i < 0 || j < i {
		return ""
	}
	return s[i:j+len(sectionEnd(name))] + "\n"
}

var anchorDrop = regexp.MustCompile("[^a-z0-9 -]")

// anchor is GitHub's heading anchor for a pitfall's section.
func anchor(p *Pitfall) string {
	h := strings.ToLower(fmt.Sprintf("%s. %s (%s)", p.Num, p.Title, p.Name))
	h = anchorDrop.ReplaceAllString(h, "")
	return strings.ReplaceAll(h, " ", "-")
}
