package flows_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
)

// What an expression reads at the state's root: the keys a retry on another version
// checks the state for.
func TestExpressionsSayWhichStateKeysTheyRead(t *testing.T) {
	for src, want := range map[string]string{
		`{tier: "small", discount: (.customer | tonumber)}`: "customer",
		`.ticket.body`:                  "ticket",
		`.items[] | .price`:             "items",
		`{name, total: (.a + .b)}`:      "a,b,name",
		`if .vip then .gold else 0 end`: "gold,vip",
		`[.x, .y] | map(.z)`:            "x,y",
		`select(.ready) | .payload`:     "ready",
		`.`:                             "(whole)",
		`tojson`:                        "(whole)",
		`"constant"`:                    "",
	} {
		q, err := flows.CompileJQ(src)
		if err != nil {
			t.Fatal(err)
		}
		keys, whole := q.RootFields()
		got := strings.Join(keys, ",")
		if whole {
			got = "(whole)"
		}
		if got != want {
			t.Errorf("jq %s reads %q, want %q", src, got, want)
		}
	}
	for src, want := range map[string]string{
		`Dear {{.customer}}, about {{.ticket.subject}}`:     "customer,ticket",
		`{{range .messages}}{{.role}}: {{.content}}{{end}}`: "messages",
		`{{with .order}}{{.id}} for {{$.customer}}{{end}}`:  "customer,order",
		`{{if .vip}}Hi {{.name}}{{else}}Hello{{end}}`:       "name,vip",
		`{{json .}}`:       "(whole)",
		`no fields at all`: "",
	} {
		tp, err := flows.ParseTemplate(src)
		if err != nil {
			t.Fatal(err)
		}
		keys, whole := tp.RootFields()
		got := strings.Join(keys, ",")
		if whole {
			got = "(whole)"
		}
		if got != want {
			t.Errorf("template %s reads %q, want %q", src, got, want)
		}
	}
}
