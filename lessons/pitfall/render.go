package pitfall

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"
)

// WriteTable prints a run's timeline as a table: logical time, who, to whom, what, the
// reply, and what it means.
func WriteTable(w io.Writer, events []Event) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  t\twho\tto\twhat\treply\tmeaning")
	for _, e := range events {
		who := e.Actor
		if who == "" {
			who = "·"
		}
		to := e.To
		if to == "" {
			to = "·"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", e.T, who, to, e.What, e.Reply, e.Note)
	}
	return tw.Flush()
}

// Mermaid returns a run's timeline as a Mermaid sequence diagram.
func Mermaid(events []Event) string {
	var b strings.Builder
	b.WriteString("sequenceDiagram\n")
	seen := map[string]bool{}
	var order []string
	participant := func(name string) {
		if name == "" || seen[name] {
			return
		}
		seen[name] = true
		order = append(order, mermaidID(name))
		fmt.Fprintf(&b, "    participant %s as %s\n", mermaidID(name), name)
	}
	for _, e := range events { // actors first, in order of appearance, then servers
		participant(e.Actor)
	}
	for _, e := range events {
		participant(e.To)
	}
	inside := map[string]bool{}
	for _, e := range events {
		a, to := mermaidID(e.Actor), mermaidID(e.To)
		text := mermaidText(fmt.Sprintf("t=%d %s", e.T, e.What))
		switch {
		case e.Kind == KindCommand || e.Kind == KindOp:
			fmt.Fprintf(&b, "    %s->>%s: %s\n", a, to, text)
			reply := e.Reply
			if e.Note != "" {
				if reply != "" {
					reply += " — "
				}
				reply += e.Note
			}
			if reply != "" {
				fmt.Fprintf(&b, "    %s-->>%s: %s\n", to, a, mermaidText(reply))
			}
		case e.Kind == KindEnter:
			inside[e.Actor] = true
			fmt.Fprintf(&b, "    activate %s\n", a)
			fmt.Fprintf(&b, "    Note over %s: %s\n", a, text)
		case e.Kind == KindExit || e.Kind == KindCrash:
			fmt.Fprintf(&b, "    Note over %s: %s\n", a, text)
			if inside[e.Actor] {
				inside[e.Actor] = false
				fmt.Fprintf(&b, "    deactivate %s\n", a)
			}
		case e.Actor == "":
			span := order[0]
			if len(order) > 1 {
				span += "," + order[len(order)-1]
			}
			fmt.Fprintf(&b, "    Note over %s: %s\n", span, text)
		default:
			fmt.Fprintf(&b, "    Note over %s: %s\n", a, text)
		}
	}
	return b.String()
}

var nonID = regexp.MustCompile(`[^A-Za-z0-9_]`)

func mermaidID(name string) string { return nonID.ReplaceAllString(name, "_") }

// mermaidText escapes what Mermaid would read as syntax in a message (one pass, so the
// entities it inserts are not escaped again).
var mermaidText = strings.NewReplacer("#", "#35;", ";", "#59;", "<", "#lt;", ">", "#gt;", "\n", " ").Replace
