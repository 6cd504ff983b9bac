package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// decodeBody decodes a request body that must be exactly one JSON value into v. It refuses
// what encoding/json's Decoder lets through: data after the value (two concatenated requests,
// or a truncated edit, would otherwise pass as the first), and an object that names a member
// twice (the last would silently win). Unknown members are ignored, as encoding/json does.
// The body is read whole: its size is bounded by the limitBody middleware.
func decodeBody(body io.Reader, v any) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	// Unmarshal, unlike Decoder.Decode, fails on anything after the value but white space.
	if err := json.Unmarshal(data, v); err != nil {
		return err
	}
	return checkDuplicateKeys(data)
}

// checkDuplicateKeys reports the first member name that one object of data, a valid JSON
// value, carries twice. Names that differ only in case count as the same: encoding/json
// matches them to the same field. It walks the tokens with a stack rather than recursing, so
// that deep nesting costs heap, not stack.
func checkDuplicateKeys(data []byte) error {
	type frame struct {
		names   map[string]bool // nil in an array
		wantKey bool            // in an object: the next token is a member name
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if top != nil && top.names != nil && top.wantKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			name := tok.(string) // a valid object has only names here
			folded := foldName(name)
			if top.names[folded] {
				return fmt.Errorf("duplicate key %q", name)
			}
			top.names[folded] = true
			top.wantKey = false
			continue
		}
		if top != nil && top.names != nil {
			top.wantKey = true // this token is a member's value, or opens it
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{names: map[string]bool{}, wantKey: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// foldName maps names that encoding/json would match to the same field to one string: it
// folds each rune as encoding/json's own case-insensitive match does.
func foldName(name string) string {
	return strings.Map(func(r rune) rune { return unicode.ToUpper(unicode.ToLower(r)) }, name)
}
