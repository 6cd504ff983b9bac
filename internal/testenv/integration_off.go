//go:build !integration

package testenv

// Integration reports whether the tests were built with -tags integration and must also run
// against the real stores.
const Integration = false
