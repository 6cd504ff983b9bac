package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"unicode"
)

// errBodyUnread is decodeBody's error for a body it could not read in full: the client sent
// it too slowly for the server's ReadTimeout, or went away. What it wraps, a network error
// that names the server's own address, is for the log, not for the client.
var errBodyUnread = errors.New("api: request body could not be read in full")

// decodeBody decodes a request body that must be exactly one JSON value into v, a pointer to
// a struct. It refuses what encoding/json lets through: data after the value (two
// concatenated requests, or a truncated edit, would otherwise pass as the first), an object
// that names a member twice (the last would silently win), and a member of the top-level
// object named like one of v's fields in another case ("Stock" for "stock"): encoding/json
// matches names regardless of case, while the API's names, like the OpenAPI document's, are
// exact. Unknown members are ignored, as encoding/json does. The body is read whole: its size
// is bounded by the limitBody middleware.
func decodeBody(body io.Reader, v any) error {
	data, err := io.ReadAll(body)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return err
	case err != nil:
		return fmt.Errorf("%w: %w", errBodyUnread, err)
	}
	// Unmarshal, unlike Decoder.Decode, fails on anything after the value but white space.
	if err := json.Unmarshal(data, v); err != nil {
		return err
	}
	return checkMembers(data, fieldNames(v))
}

// fieldNames maps the folded JSON name of each field of the struct v points to to the name
// itself (see foldName).
func fieldNames(v any) map[string]string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	names := map[string]string{}
	if t.Kind() != reflect.Struct {
		return names
	}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case !f.IsExported() || name == "-":
			continue
		case name == "":
			name = f.Name
		}
		names[foldName(name)] = name
	}
	return names
}

// checkMembers reports the first member name that one object of data, a valid JSON value,
// carries twice, or that the top-level object carries in another case than fields' (folded
// name to name). Names that differ only in case count as the same: encoding/json matches them
// to the same field. It walks the tokens with a stack rather than recursing, so that deep
// nesting costs heap, not stack.
func checkMembers(data []byte, fields map[string]string) error {
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
			if want, ok := fields[folded]; ok && len(stack) == 1 && name != want {
				return fmt.Errorf("member %q: names are case-sensitive: the field is %q", name, want)
			}
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
