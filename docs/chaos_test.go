package docs

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestChaosTripwiresDocumented: the short chaos run's tripwires that README.md and
// docs/chaos.md state are the ones scripts/chaos.sh applies. They were lowered in the script
// once while the README kept the old figure, so a reader judged a CI run by a threshold it
// no longer had.
func TestChaosTripwiresDocumented(t *testing.T) {
	script := read(t, "../scripts/chaos.sh")
	short := regexp.MustCompile(`(?s)if \[\[ \$SHORT == 1 \]\]; then(.*?)\nelse`).FindStringSubmatch(script)
	if short == nil {
		t.Fatal("scripts/chaos.sh: no `if [[ $SHORT == 1 ]]; then … else` block")
	}
	def := func(name string) string {
		m := regexp.MustCompile(name + `=\$\{CHAOS_` + name + `:-([^}]+)\}`).FindStringSubmatch(short[1])
		if m == nil {
			t.Fatalf("scripts/chaos.sh: the short run sets no default for %s", name)
		}
		return m[1]
	}
	goodput, p99 := def("GOODPUT"), strings.TrimSuffix(def("SHED_P99"), "ms")

	readme := strings.Join(strings.Fields(read(t, "../README.md")), " ")
	for _, want := range []string{"judges the goodput as a tripwire at " + goodput + " ", "p99 as a tripwire at " + p99 + " ms"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md does not say %q (scripts/chaos.sh's short run)", want)
		}
	}
	chaos := read(t, "chaos.md")
	row := regexp.MustCompile("(?m)^\\| `CHAOS_GOODPUT` \\|.*$").FindString(chaos)
	if want := "(short: `" + goodput + "`)"; !strings.Contains(row, want) || !strings.Contains(row, "short run's "+goodput+" a tripwire") {
		t.Errorf("docs/chaos.md's CHAOS_GOODPUT row does not give the short run's %s throughout:\n%s", goodput, row)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
