package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCheckPprofAddr: the profiling listener is off by default and only ever on loopback.
func TestCheckPprofAddr(t *testing.T) {
	tests := []struct {
		addr string
		ok   bool
	}{
		{"", true},
		{"127.0.0.1:6060", true},
		{"[::1]:6060", true},
		{"localhost:6060", true},
		{"127.0.0.2:6060", true},
		{":6060", false}, // every interface
		{"0.0.0.0:6060", false},
		{"10.0.0.1:6060", false},
		{"example.com:6060", false},
		{"127.0.0.1", false},
		{"127.0.0.1:", false},      // a random port
		{"127.0.0.1:99999", false}, // refused by net.Listen only after the stores were opened
	}
	for _, tt := range tests {
		err := checkPprofAddr(tt.addr)
		assert.Equal(t, tt.ok, err == nil, "checkPprofAddr(%q) = %v", tt.addr, err)
	}
}
