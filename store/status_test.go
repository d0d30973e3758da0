package store_test

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/store"
)

// The run status has one state machine, store.RunStatusChanges: docs/runtime.md shows
// the same table, and each script writes only the statuses its rows reach (a status
// literal written to the run hash, or one commit.lua's finish and newstatus take).
func TestTheRunStatusMachineIsTheOneTheScriptsAndDocsFollow(t *testing.T) {
	doc, err := os.ReadFile("../docs/runtime.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, "<!-- status-table -->"), strings.Index(s, "<!-- /status-table -->")
	if i < 0 || j < i {
		t.Fatal("docs/runtime.md has no status table between <!-- status-table --> markers")
	}
	var docRows []string
	for _, l := range strings.Split(s[i:j], "\n") {
		cells := strings.Split(strings.Trim(l, "| "), " | ")
		if len(cells) != 4 || strings.HasPrefix(cells[0], "---") || cells[0] == "from" {
			continue
		}
		from := strings.Trim(cells[0], "`")
		if from == "(new)" {
			from = ""
		}
		docRows = append(docRows, from+" -> "+strings.Trim(cells[1], "`")+" by "+strings.Trim(cells[2], "`")+": "+cells[3])
	}
	var goRows []string
	reach := map[string]map[string]bool{} // script -> statuses it may write
	for _, c := range store.RunStatusChanges {
		goRows = append(goRows, c.From+" -> "+c.To+" by "+c.By+": "+c.When)
		if reach[c.By] == nil {
			reach[c.By] = map[string]bool{}
		}
		reach[c.By][c.To] = true
	}
	if strings.Join(docRows, "\n") != strings.Join(goRows, "\n") {
		t.Errorf("docs/runtime.md's status table:\n%s\nstore.RunStatusChanges:\n%s", strings.Join(docRows, "\n"), strings.Join(goRows, "\n"))
	}

	// What each script writes: 'status', '<x>' in a hash write, finish('<x>') and
	// newstatus = '<x>' in commit.lua.
	writes := regexp.MustCompile(`(?:HSET', KEYS\[\d+\], 'status', '|finish\('|newstatus = ')([a-z_]+)'`)
	files, err := os.ReadDir("lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile("lua/" + f.Name())
		if err != nil {
			t.Fatal(err)
		}
		var bad []string
		for _, m := range writes.FindAllStringSubmatch(string(b), -1) {
			if !reach[f.Name()][m[1]] {
				bad = append(bad, m[1])
			}
		}
		if f.Name() == "start.lua" && !strings.Contains(string(b), "'status', 'queued'") {
			bad = append(bad, "(no queued)")
		}
		if len(bad) > 0 {
			sort.Strings(bad)
			t.Errorf("%s sets the run status to %v, which store.RunStatusChanges does not let it", f.Name(), bad)
		}
	}
}
