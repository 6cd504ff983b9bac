// Package nginx holds no code: its integration test runs the nginx in front of the instances
// with this directory's config (nginx.conf, upstream.conf) against tiny upstreams on
// loopback, and checks what the config promises: a POST is never retried on another
// instance once it has been sent (a GET is), a request whose connect failed or timed out
// moves to the other instance, failures do not take an instance out of rotation, a client
// has nginx's answer within the bounds the config states however many instances hang, an
// answer an instance gives within its own bounds still passes, the instances' /metrics and
// /readyz reach no client through it, a body declared over the limit is refused before it
// is invited (Expect: 100-continue), and every answer nginx gives itself is in the API's
// JSON error shape.
package nginx
