package main

import (
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows/nodes/llmtest"
)

// junitDoc is what CI systems read of sluice test's JUnit XML.
type junitDoc struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Suites   []struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Cases    []struct {
			Name      string `xml:"name,attr"`
			Classname string `xml:"classname,attr"`
			Time      string `xml:"time,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func readJUnit(t *testing.T, path string) junitDoc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), xml.Header) {
		t.Errorf("the JUnit file does not start with the XML header")
	}
	var d junitDoc
	if err := xml.Unmarshal(b, &d); err != nil {
		t.Fatalf("the JUnit file is not XML: %v\n%s", err, b)
	}
	return d
}

// sluiceTest runs sluice test with the embedded Redis and returns its output and exit code.
func sluiceTest(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"test"}, args...)...)
	cmd.Env = append(append(os.Environ(), "REDIS_URL="), env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// Every example ships cases and passes them (models pinned: no provider needed); the
// glob names the cases files too, which sluice test takes for what they are.
func TestSluiceTestPassesEveryExamplesCases(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "flows", "examples", "*.json"))
	junit := filepath.Join(t.TempDir(), "junit.xml")
	out, errs, code := sluiceTest(t, nil, append(files, "--junit", junit)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	d := readJUnit(t, junit)
	flows := 0
	for _, f := range files {
		if !strings.HasSuffix(f, ".cases.json") {
			flows++
			if _, err := os.Stat(strings.TrimSuffix(f, ".json") + ".cases.json"); err != nil {
				t.Errorf("example %s has no cases file", f)
			}
		}
	}
	if len(d.Suites) != flows || d.Failures != 0 || d.Tests < flows {
		t.Errorf("JUnit: %d suites, %d tests, %d failures; want a suite per example (%d), no failures", len(d.Suites), d.Tests, d.Failures, flows)
	}
	if !strings.Contains(out, "CASE") || !strings.Contains(out, "greets-ada") {
		t.Errorf("no table:\n%s", out)
	}
}

// A failing case exits 1, with the reason in the table and in the JUnit failure; --compare
// runs a second version and shows both verdicts and how the outputs differ; bad
// arguments exit 2 and a bad cases file 1 with its problems at their paths.
func TestSluiceTestExitCodesCompareAndJUnit(t *testing.T) {
	dir := t.TempDir()
	linear, err := os.ReadFile(filepath.Join("..", "..", "flows", "examples", "linear.json"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flow := write("linear.json", string(linear))
	write("linear.cases.json", `{"sluice_cases": 1, "cases": [
	  {"id": "ada", "input": {"name": "Ada"}, "expect": [{"path": ".greeting", "equals": "HELLO, ADA!"}]},
	  {"id": "wrong", "input": {"name": "Bob"}, "expect": [{"path": ".greeting", "equals": "HI, BOB"}]}]}`)
	junit := filepath.Join(dir, "junit.xml")
	out, errs, code := sluiceTest(t, nil, flow, "--junit", junit, "--parallel", "2")
	if code != 1 {
		t.Fatalf("a failing case: exit %d, want 1\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(out, "wrong") || !strings.Contains(out, "FAIL") || !strings.Contains(out, `got "HELLO, BOB!", want "HI, BOB"`) || !strings.Contains(out, "1 of 2 passed") {
		t.Errorf("the table:\n%s", out)
	}
	if !strings.Contains(errs, "1 case failed") {
		t.Errorf("stderr: %s", errs)
	}
	d := readJUnit(t, junit)
	if d.Tests != 2 || d.Failures != 1 || len(d.Suites) != 1 {
		t.Fatalf("JUnit %+v", d)
	}
	for _, c := range d.Suites[0].Cases {
		if (c.Failure != nil) != (c.Name == "wrong") {
			t.Errorf("JUnit case %s: failure %+v", c.Name, c.Failure)
		}
		if c.Failure != nil && !strings.Contains(c.Failure.Message, "HI, BOB") {
			t.Errorf("JUnit failure message %q", c.Failure.Message)
		}
		if c.Classname != "linear" || c.Time == "" {
			t.Errorf("JUnit case %+v", c)
		}
	}

	// --compare another version of the flow (a file): Bob passes there, Ada does not.
	other := write("linear-b.json", strings.Replace(string(linear), `(.greeting | ascii_upcase)`, `(if .name == \"Bob\" then \"HI, BOB\" else .greeting end)`, 1))
	out, errs, code = sluiceTest(t, nil, flow, "--compare", other)
	if code != 1 {
		t.Fatalf("--compare: exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"(A) against", "ada    pass  FAIL", "wrong  FAIL  pass", "ada: the outputs differ", `replace greeting: "HELLO, ADA!" → "Hello, Ada!"`, "pass rate", "1/2 (50%)", "latency (mean)"} {
		if !strings.Contains(out, want) {
			t.Errorf("--compare output lacks %q:\n%s", want, out)
		}
	}

	if _, errs, code = sluiceTest(t, nil, flow, "--parallel", "0"); code != 2 {
		t.Errorf("--parallel 0: exit %d, want 2 (%s)", code, errs)
	}
	if _, errs, code = sluiceTest(t, nil); code != 2 {
		t.Errorf("no files: exit %d, want 2 (%s)", code, errs)
	}
	write("linear.cases.json", `{"sluice_cases": 1, "cases": [{"id": "x", "input": {}, "expect": [{"fails_at": "nowhere"}]}]}`)
	if _, errs, code = sluiceTest(t, nil, flow); code != 1 || !strings.Contains(errs, "cases[0].expect[0].fails_at") {
		t.Errorf("a bad cases file: exit %d, want 1 with the problem's path; stderr %s", code, errs)
	}
}

// A model-graded case through the binary, against the local OpenAI-protocol server: the
// grade's reason is the case's why.
func TestSluiceTestGradesWithAModel(t *testing.T) {
	srv := llmtest.New(t)
	srv.Respond(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(r.Last().Text(), "HELLO, ADA!") {
			return llmtest.Text(`{"pass": false, "reason": "it shouts at the customer"}`)
		}
		return llmtest.Text(`{"pass": true, "reason": "fine"}`)
	})
	dir := t.TempDir()
	linear, _ := os.ReadFile(filepath.Join("..", "..", "flows", "examples", "linear.json"))
	flow := filepath.Join(dir, "linear.json")
	os.WriteFile(flow, linear, 0o644)
	os.WriteFile(filepath.Join(dir, "linear.cases.json"), []byte(`{"sluice_cases": 1, "cases": [
	  {"id": "polite", "input": {"name": "Ada"}, "expect": [{"path": ".greeting", "graded": {"model": "judge", "rubric": "The greeting is polite and calm."}}]}]}`), 0o644)
	out, errs, code := sluiceTest(t, []string{"OPENAI_BASE_URL=" + srv.URL, "OPENAI_API_KEY=test"}, flow)
	if code != 1 || !strings.Contains(out, "it shouts at the customer") {
		t.Fatalf("exit %d, want 1 with the grader's reason\n%s\n%s", code, out, errs)
	}
	if n := srv.Calls(); n != 1 {
		t.Errorf("%d grading requests, want 1", n)
	}
}

// sluice validate flows/*.json checks the cases files the glob names as cases files,
// against the flow beside them, instead of calling them broken flows.
func TestValidateChecksCasesFilesBesideTheirFlows(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "flows", "examples", "*.json"))
	if out, err := exec.Command(binary, append([]string{"validate"}, files...)...).CombinedOutput(); err != nil {
		t.Fatalf("the examples and their cases: %v\n%s", err, out)
	}
	dir := t.TempDir()
	linear, _ := os.ReadFile(filepath.Join("..", "..", "flows", "examples", "linear.json"))
	os.WriteFile(filepath.Join(dir, "linear.json"), linear, 0o644)
	os.WriteFile(filepath.Join(dir, "linear.cases.json"), []byte(`{"sluice_cases": 1, "cases": [{"id": "x", "input": {}, "expect": [{"fails_at": "zz"}]}]}`), 0o644)
	out, err := exec.Command(binary, "validate", filepath.Join(dir, "linear.json"), filepath.Join(dir, "linear.cases.json")).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), `linear.cases.json: cases[0].expect[0].fails_at: the flow has no node "zz"`) {
		t.Errorf("a bad cases file: %v\n%s", err, out)
	}
}
