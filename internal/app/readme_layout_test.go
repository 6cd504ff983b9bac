package app_test

import (
	"os"
	"os/exec"
	"path"
	"strings"
	"testing"
)

// TestREADMELayoutNamesEveryPackage: every package of the module has its place in README's
// Layout tree and a row of its package table. A package added without either is one a reader
// of the README cannot find (lessons/asyncpitfall had a row but no place in the tree, docs
// neither).
func TestREADMELayoutNamesEveryPackage(t *testing.T) {
	out, err := exec.Command("go", "list", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	tree := layoutTree(t, string(b))
	table := packageTable(t, string(b))
	pkgs := strings.Fields(strings.ReplaceAll(string(out), module, ""))
	if len(pkgs) < 10 {
		t.Fatalf("go list saw only %d packages: %q", len(pkgs), out)
	}
	for _, p := range pkgs {
		if path.Base(p) == "mocks" {
			p = path.Dir(p) // generated for their parent, and the README says so beside the table
		}
		if !inTree(tree, p) {
			t.Errorf("package %s has no place in README's Layout tree (entries: %v)", p, tree)
		}
		if !inTable(table, p) {
			t.Errorf("package %s has no row in README's package table (first cells: %q)", p, table)
		}
	}
}

// treeEntry is a path of the Layout tree; leaf when no entry is indented under it.
type treeEntry struct {
	path string
	leaf bool
}

// layoutTree returns the paths the Layout section's code block names: the leading words of a
// line that end in "/" ("order/  voucher/" under internal/; of a line that is not indented,
// only the first, "deploy/,"), an indented one under the last line that was not indented.
func layoutTree(t *testing.T, readme string) []treeEntry {
	t.Helper()
	_, after, ok := strings.Cut(readme, "\n## Layout\n\n```\n")
	block, _, ok2 := strings.Cut(after, "\n```")
	if !ok || !ok2 {
		t.Fatal("README has no code block right under ## Layout")
	}
	var entries []treeEntry
	parent := -1 // the entry of the last line that was not indented
	for _, line := range strings.Split(block, "\n") {
		indented := strings.HasPrefix(line, " ")
		if indented && parent >= 0 {
			entries[parent].leaf = false
		}
		for i, w := range strings.Fields(line) {
			w = strings.TrimSuffix(w, ",")
			if !strings.HasSuffix(w, "/") || !indented && i > 0 {
				break // the description ("scripts/  lua/ (the service's Lua scripts)…")
			}
			if indented && parent >= 0 {
				w = entries[parent].path + "/" + w
			} else {
				parent = len(entries)
			}
			entries = append(entries, treeEntry{strings.TrimSuffix(w, "/"), true})
		}
	}
	if len(entries) < 10 {
		t.Fatalf("README's Layout tree names only %d paths: %v", len(entries), entries)
	}
	return entries
}

// inTree reports whether p is an entry of the tree, or lies under one with nothing listed
// under it.
func inTree(tree []treeEntry, p string) bool {
	for _, e := range tree {
		if p == e.path || e.leaf && strings.HasPrefix(p, e.path+"/") {
			return true
		}
	}
	return false
}

// packageTable returns the code spans of the first cell of each row of README's table of
// packages: "internal/app", "deploy/", "scripts/cluster.sh", …
func packageTable(t *testing.T, readme string) []string {
	t.Helper()
	_, after, ok := strings.Cut(readme, "\n| Package | Owns |\n")
	if !ok {
		t.Fatal("README has no table | Package | Owns |")
	}
	var spans []string
	for _, row := range strings.Split(after, "\n")[1:] { // the |---| line
		if !strings.HasPrefix(row, "|") {
			break
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(row, "|"), " | ")
		for _, s := range strings.Split(first, ",") {
			spans = append(spans, strings.Trim(strings.TrimSpace(s), "`"))
		}
	}
	if len(spans) < 10 {
		t.Fatalf("README's package table has only %d entries: %q", len(spans), spans)
	}
	return spans
}

// inTable reports whether a row names p, a directory above it ("deploy/"), or a file in it
// ("scripts/cluster.sh" for scripts, whose tests those are).
func inTable(table []string, p string) bool {
	for _, s := range table {
		switch {
		case s == p,
			strings.HasSuffix(s, "/") && strings.HasPrefix(p+"/", s),
			path.Ext(s) != "" && path.Dir(s) == p:
			return true
		}
	}
	return false
}
