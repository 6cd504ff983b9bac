package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestRelativeLinks: every relative link in README.md and docs/*.md names a file that exists,
// and a #fragment names a heading of the markdown file it points into, by GitHub's anchor
// rules. A renamed heading or moved file otherwise leaves a link that only a reader finds.
func TestRelativeLinks(t *testing.T) {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "README.md"))
	anchors := map[string]map[string]bool{} // file (cleaned path) → its anchors
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(b))
		anchors[path] = a
		return a
	}
	checked := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range relativeLinks(string(b)) {
			checked++
			target, frag, _ := strings.Cut(l.target, "#")
			path := filepath.Clean(file)
			if target != "" {
				path = filepath.Join(filepath.Dir(file), target)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %q: no such file %s", file, l.line, l.target, path)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if !anchorsOf(path)[frag] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", file, l.line, l.target, path, frag)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("found only %d relative links in %q: is the link pattern still right?", checked, files)
	}
}

type link struct {
	target string
	line   int
}

var (
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// relativeLinks returns the targets of the inline links of md outside code blocks and code
// spans that name no scheme (http:, mailto:, …).
func relativeLinks(md string) []link {
	var out []link
	fenced := false
	for i, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			if !scheme.MatchString(m[1]) {
				out = append(out, link{m[1], i + 1})
			}
		}
	}
	return out
}

// headingAnchors returns the anchors GitHub gives the ATX headings of md: the heading's text
// (markdown's code spans, emphasis and links reduced to their text) lower-cased, every
// character but letters, digits, '-', '_' and spaces removed, spaces made '-'; a repeated
// anchor gets -1, -2, … appended.
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	fenced := false
	linkText := regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		text, ok := strings.CutPrefix(line, "#")
		if fenced || !ok {
			continue
		}
		text = strings.TrimLeft(text, "#")
		if !strings.HasPrefix(text, " ") {
			continue
		}
		text = linkText.ReplaceAllString(strings.TrimSpace(text), "$1")
		var a strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				a.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				a.WriteRune(r)
			}
		}
		anchor := a.String()
		for n := 1; out[anchor]; n++ {
			anchor = a.String() + "-" + strconv.Itoa(n)
		}
		out[anchor] = true
	}
	return out
}
