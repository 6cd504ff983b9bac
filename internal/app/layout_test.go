package app_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/seckill/seckill/"

// TestImportsRunOneWay holds the layout README describes: cmd → app → api → order/voucher →
// lock/database, with the lessons and the load test beside the service, never imported by it.
// It reads the module's real import graph (non-test imports) with `go list`.
func TestImportsRunOneWay(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"...").Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module) {
				imports[pkg] = append(imports[pkg], strings.TrimPrefix(imp, module))
			}
		}
	}
	if len(imports) < 5 {
		t.Fatalf("go list saw only %d packages with internal imports: %q", len(imports), out)
	}

	// Each rule: packages under from may not import packages under any of to.
	rules := []struct {
		from   string
		to     []string
		except string // a package under to that from may import after all
		why    string
	}{
		{"internal/", []string{"cmd/", "lessons/", "loadtest/"}, "", "the service never imports the binary, the lessons or the load test"},
		{"internal/lock", []string{"internal/", "migrations", "lessons/"}, "internal/lock", "the lock library knows nothing of orders, vouchers, the schema or the wiring"},
		{"internal/order", []string{"internal/api", "internal/app"}, "", "services sit below the HTTP layer and the wiring"},
		{"internal/voucher", []string{"internal/api", "internal/app", "internal/order"}, "", "vouchers sit below orders"},
		{"internal/api", []string{"internal/app", "internal/database", "internal/lock", "internal/idgen"}, "", "handlers see services only"},
		{"internal/", []string{"internal/testenv"}, "", "test servers are for tests"},
		{"lessons/", []string{"internal/app", "internal/api", "internal/order"}, "", "lessons use the lock library as its users do"},
	}
	for _, r := range rules {
		for pkg, deps := range imports {
			if !strings.HasPrefix(pkg, r.from) || strings.HasPrefix(pkg, "internal/testenv") {
				continue
			}
			for _, d := range deps {
				for _, banned := range r.to {
					if strings.HasPrefix(d, banned) && (r.except == "" || !strings.HasPrefix(d, r.except)) {
						t.Errorf("%s imports %s: %s", pkg, d, r.why)
					}
				}
			}
		}
	}
}

// TestRunIsNoPartOfTheModule: run/, where the servers of the scripts and tests keep their data
// (MySQL makes and removes a directory per database there), is a module of its own (run/go.mod),
// so the go command's ./... patterns never walk it: a directory removed mid-walk failed the
// walk. A Go package put under run/ must not be one of this module's.
func TestRunIsNoPartOfTheModule(t *testing.T) {
	dir, err := os.MkdirTemp("../../run", "layout-probe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "probe.go"), []byte("package probe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-e", "-f", "{{.Dir}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range strings.Fields(string(out)) {
		if d == abs {
			t.Fatalf("go list %s... lists %s: run/ is walked as part of the module (is run/go.mod there?)", module, d)
		}
	}
}
