package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/store/storetest"
)

// Promoting from the editor's History tab (docs/environments.md): the environments
// and the version each runs are listed; "Promote to prod" on a version whose cases pass
// moves prod there and says so; on a version whose case fails the gate refuses, the
// page names the failing case and prod stays where it was.
func TestBrowserPromoteAVersionAndSeeTheGateRefuseARegression(t *testing.T) {
	rdb := storetest.Real(t)
	dir := t.TempDir()
	flowID, _ := writeExampleFlow(t, dir, "linear", nil)
	storetest.DeleteFlowKeys(t, rdb, flowID)
	os.WriteFile(filepath.Join(dir, flowID+".cases.json"), []byte(`{"sluice_cases": 1, "cases": [
	  {"id": "greets-ada", "input": {"name": "Ada"}, "expect": [{"path": ".greeting", "equals": "HELLO, ADA!"}]}]}`), 0o644)
	base := serveForBrowser(t, dir)
	b := newBrowser(t, base)
	dialogs := b.acceptDialogs()

	b.open("/flows/" + flowID)
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 4`)
	b.click("#history-tab")
	b.waitFor("one version and the environments", `document.querySelectorAll(".version").length === 1 && document.querySelectorAll(".environments li").length === 2`)
	b.waitText(`.environments li[data-env="prod"]`, "no version yet")
	v1 := evaluate[string](b, `document.querySelector(".version").dataset.version`)

	b.click(`.version button.promote[data-env="prod"]`)
	b.waitText("#promote-result", "prod now runs "+v1[:12]+" after 1 of 1 test cases passed")
	b.waitFor("the prod badge on the version", fmt.Sprintf(`!!document.querySelector('.version[data-version=%q] .badge-env[data-env="prod"]')`, v1))
	b.waitText(`.environments li[data-env="prod"]`, "promoted by")
	if got := strings.Join(dialogs(), "\n"); !strings.Contains(got, "Promote version "+v1[:12]+" to prod?") {
		t.Errorf("promoting did not ask first; dialogs: %q", got)
	}

	// A version that stops shouting, saved elsewhere: its case fails.
	status := evaluate[int](b, `(async () => {
		const id = `+fmt.Sprintf("%q", flowID)+`;
		const d = await (await fetch("/api/flows/" + id)).json();
		d.nodes.find((n) => n.id === "shout").params.expr = "{greeting}";
		const res = await fetch("/api/flows/" + id + "?message=quieter", {method: "PUT", headers: {"Content-Type": "application/json"}, body: JSON.stringify(d)});
		return res.status;
	})()`, chromedp.EvalAwaitPromise)
	if status != 200 {
		t.Fatalf("saving the second version: %v", status)
	}
	b.open("/flows/" + flowID)
	b.waitFor("the editor", `document.querySelectorAll(".react-flow__node").length === 4`)
	b.click("#history-tab")
	b.waitFor("two versions", `document.querySelectorAll(".version").length === 2`)
	v2 := evaluate[string](b, `document.querySelector(".version.current").dataset.version`)
	b.click(`.version.current button.promote[data-env="prod"]`)
	b.waitText("#promote-result", "Not promoted to prod")
	b.waitText("#promote-result", "1 of 1 test cases fail: greets-ada")
	b.waitFor("the failing test on the version", `document.querySelector(".version.current .version-tests")?.innerText.includes("failing: greets-ada")`)
	b.shot("editor-promote-refused")
	b.waitFor("prod still on the first version", fmt.Sprintf(`document.querySelector('.environments li[data-env="prod"]').dataset.version === %q`, v1))

	e := engine.New(rdb, registry(nil), engine.Options{})
	if got, err := e.EnvVersion(context.Background(), flowID, "prod"); err != nil || got != v1 {
		t.Errorf("prod is %.12s (%v) after the refused promotion of %.12s, want %.12s", got, err, v2, v1)
	}
}
