package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"
)

// leanClient sends the load's order POSTs (and `harness rate -get`'s GETs) over keep-alive
// connections of its own: each request is written and its answer read by the calling
// goroutine, with nothing else in between.
//
// Why not net/http's client: the client shares the machine with what it measures. net/http
// hands every request to two goroutines per connection (a writer and a reader) and back, and
// at the 2,500 requests a second of the overload experiment that took a third of a core, about
// twice what this takes, and the CPU went missing from the orders the experiment counts
// (docs/chaos.md). A request here is what a remote client's would be on the wire: one
// HTTP/1.1 POST without a body, a Host and an X-User-ID header.
type leanClient struct {
	addr    string // host:port
	host    string // Host header
	timeout time.Duration
	idle    chan *leanConn // idle connections; a full channel closes the extra one
	// limit, when set, bounds the requests in flight, and so the connections: a request
	// waits for a place before it takes or opens a connection.
	limit chan struct{}
}

type leanConn struct {
	c net.Conn
	r *bufio.Reader
}

// newLeanClient returns a client of base (http://host:port) that keeps up to maxIdle idle
// connections and, when maxInflight > 0, sends at most that many requests at once.
func newLeanClient(base string, timeout time.Duration, maxIdle, maxInflight int) (*leanClient, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("lean client: %w", err)
	}
	if u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("lean client: %q: want http://host:port", base)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	l := &leanClient{addr: addr, host: u.Host, timeout: timeout, idle: make(chan *leanConn, maxIdle)}
	if maxInflight > 0 {
		l.limit = make(chan struct{}, maxInflight)
	}
	return l, nil
}

// post sends POST path with X-User-ID user and returns the status and up to 64 KiB of the
// body. An error means no whole answer: refused, reset, closed, or past the timeout.
func (l *leanClient) post(path string, user int64) (int, []byte, error) {
	return l.do(true, path, user)
}

// get sends GET path, without a user, and returns what post does: the trivial endpoint's
// request, which `harness rate -get` times beside the orders' (docs/loadtest.md, Scaling).
func (l *leanClient) get(path string) (int, []byte, error) {
	return l.do(false, path, 0)
}

func (l *leanClient) do(post bool, path string, user int64) (int, []byte, error) {
	if l.limit != nil {
		l.limit <- struct{}{}
		defer func() { <-l.limit }()
	}
	c, err := l.conn()
	if err != nil {
		return 0, nil, err
	}
	status, body, keep, err := l.roundTrip(c, post, path, user)
	if err != nil || !keep {
		_ = c.c.Close()
		return status, body, err
	}
	select {
	case l.idle <- c:
	default:
		_ = c.c.Close()
	}
	return status, body, nil
}

// closeIdle closes the idle connections.
func (l *leanClient) closeIdle() {
	for {
		select {
		case c := <-l.idle:
			_ = c.c.Close()
		default:
			return
		}
	}
}

func (l *leanClient) conn() (*leanConn, error) {
	select {
	case c := <-l.idle:
		return c, nil
	default:
	}
	nc, err := net.DialTimeout("tcp", l.addr, l.timeout)
	if err != nil {
		return nil, err
	}
	return &leanConn{c: nc, r: bufio.NewReaderSize(nc, 4096)}, nil
}

// roundTrip writes one request on c, a POST with user's X-User-ID and no body or a bare GET,
// and reads its answer.
func (l *leanClient) roundTrip(c *leanConn, post bool, path string, user int64) (status int, body []byte, keep bool, err error) {
	if err := c.c.SetDeadline(time.Now().Add(l.timeout)); err != nil {
		return 0, nil, false, err
	}
	req := make([]byte, 0, 160)
	if post {
		req = append(req, "POST "...)
	} else {
		req = append(req, "GET "...)
	}
	req = append(req, path...)
	req = append(req, " HTTP/1.1\r\nHost: "...)
	req = append(req, l.host...)
	if post {
		req = append(req, "\r\nX-User-ID: "...)
		req = strconv.AppendInt(req, user, 10)
		req = append(req, "\r\nContent-Length: 0"...)
	}
	req = append(req, "\r\n\r\n"...)
	if _, err := c.c.Write(req); err != nil {
		return 0, nil, false, err
	}
	return readAnswer(c.r)
}

// maxBody bounds the body an answer is read with; an answer with a longer one is an error.
const maxBody = 64 << 10

// readAnswer reads one HTTP/1.1 answer from r: its status, its body (Content-Length or chunked),
// and whether the connection may carry another request. It reads what the service and nginx
// send and nothing more general: net/http's ReadResponse, which it replaces, builds a header
// map and a body reader per answer, a quarter of the generator's CPU at 8,500 requests a second
// (docs/loadtest.md, "The open loop's generator").
func readAnswer(r *bufio.Reader) (status int, body []byte, keep bool, err error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, nil, false, err
	}
	// "HTTP/1.1 202 Accepted\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, nil, false, fmt.Errorf("malformed status line %q", line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil || status < 100 {
		return 0, nil, false, fmt.Errorf("malformed status line %q", line)
	}
	keep = line[7] == '1' // HTTP/1.0 closes unless told otherwise; taken as closing
	length, chunked := -1, false
	for {
		h, err := r.ReadSlice('\n')
		if err != nil {
			return status, nil, false, fmt.Errorf("answer cut off in its header: %w", err)
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return status, nil, false, fmt.Errorf("malformed header line %q", h)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.Atoi(string(value))
			if err != nil || n < 0 {
				return status, nil, false, fmt.Errorf("malformed Content-Length %q", value)
			}
			length = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
			if !chunked {
				return status, nil, false, fmt.Errorf("transfer encoding %q", value)
			}
		case bytes.EqualFold(name, []byte("Connection")):
			keep = !bytes.EqualFold(value, []byte("close"))
		}
	}
	switch {
	case chunked:
		body, err = io.ReadAll(io.LimitReader(httputil.NewChunkedReader(r), maxBody))
		if err == nil && len(body) == maxBody {
			err = fmt.Errorf("body of %d bytes or more", maxBody)
		}
		if err == nil {
			err = skipTrailer(r)
		}
	case status < 200:
		// An interim answer (the client sends no Expect, so none is due): the final one
		// would follow on the connection, read by nobody. Not reused.
		keep = false
	case status == http.StatusNoContent || status == http.StatusNotModified:
		// no body
	case length > maxBody:
		err = fmt.Errorf("body of %d bytes", length)
	case length >= 0:
		body = make([]byte, length)
		_, err = io.ReadFull(r, body)
	default: // neither: the body runs to the connection's end
		body, err = io.ReadAll(io.LimitReader(r, maxBody))
		keep = false
	}
	if err != nil {
		return status, nil, false, fmt.Errorf("answer cut off: %w", err)
	}
	return status, body, keep, nil
}

// skipTrailer reads a chunked body's trailer, up to the empty line that ends it.
func skipTrailer(r *bufio.Reader) error {
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			return nil
		}
	}
}
