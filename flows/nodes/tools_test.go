package nodes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
)

func TestCalculatorEvaluatesArithmeticExactlyAndNothingElse(t *testing.T) {
	calc := buildIn(t, nil, "calculator", `{"expression": "{{.e}}"}`)
	for _, c := range []struct{ expr, want string }{
		{"0.1 + 0.2", "0.3"},
		{"2 + 3 * 4", "14"},
		{"(2 + 3) * 4", "20"},
		{"2 ^ 3 ^ 2", "512"},
		{"-2 ^ 2", "4"},
		{"10 / 4", "2.5"},
		{"1 / 3", "0.333333333333333"},
		{"7 % 3", "1"},
		{"-7 % 3", "-1"},
		{"2 ^ -2", "0.25"},
		{"sqrt(16) + abs(-3)", "7"},
		{"round(2.5) + floor(-1.5) + ceil(1.2)", "3"},
		{"min(3, 1.5, 2) * max(1, 4)", "6"},
		{"1_000_000 * 1.5e-3", "1500"},
		{"2 * pi", "6.28318530717959"},
		{"100 × 3 ÷ 4", "75"},
		{"2 ^ 100", "1267650600228229401496703205376"},
	} {
		res, err := calc.Run(context.Background(), memoryStep(t, "f", `{"e": `+asJSON(c.expr)+`}`))
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if got := res.Update["result"]; got != json.Number(c.want) {
			t.Errorf("%s = %v, want %s", c.expr, got, c.want)
		}
	}
	for _, c := range []struct{ expr, why string }{
		{"1 / 0", "division by zero"},
		{"2 +", "ends too early"},
		{"(1 + 2", "not closed"},
		{"os.exit(1)", "unknown"},
		{"__import__('os')", "unexpected"},
		{"9 ^ 9 ^ 9", "exponent"},
		{"2 ^ 4000 ^ 2", "exponent"},
		{"10 ^ 4000 * 10 ^ 4000 * 10 ^ 4000 * 10 ^ 4000 * 10 ^ 4000 * 10 ^ 4000", "too large"},
		{strings.Repeat("(", 100) + "1" + strings.Repeat(")", 100), "nests"},
		{"sqrt(-1)", "negative"},
		{"ln(0)", "not a finite number"},
		{"1e99999", "too large"},
	} {
		start := time.Now()
		_, err := calc.Run(context.Background(), memoryStep(t, "f", `{"e": `+asJSON(c.expr)+`}`))
		if err == nil || !flows.IsPermanent(err) || !strings.Contains(err.Error(), c.why) || !strings.Contains(err.Error(), "params.expression") {
			t.Errorf("%s: %v, want a permanent error at params.expression saying %q", c.expr, err, c.why)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s took %s to refuse", c.expr, took)
		}
	}
	rounded := buildIn(t, nil, "calculator", `{"expression": "{{.e}}", "decimals": 2, "as": "total"}`)
	if got := runStep(t, rounded, memoryStep(t, "f", `{"e": "19.99 * 3 * 1.2"}`)).Update["total"]; got != json.Number("71.96") {
		t.Errorf("rounded to 2 decimals: %v", got)
	}
	tool := buildIn(t, nil, "calculator", `{}`).(flows.Tool)
	got, err := tool.Call(context.Background(), memoryStep(t, "f", `{}`), json.RawMessage(`{"expression": "(1200 - 150) * 0.2"}`))
	if err != nil || asJSON(got) != `{"expression":"(1200 - 150) * 0.2","result":210}` {
		t.Errorf("as a tool: %s, %v", asJSON(got), err)
	}
	if _, err := tool.Call(context.Background(), memoryStep(t, "f", `{}`), json.RawMessage(`{"expression": "1/0"}`)); err == nil {
		t.Error("a division by zero as a tool gave no error for the model")
	}
}

func TestDatetimeTellsTheTimeInAZone(t *testing.T) {
	d := buildIn(t, nil, "datetime", `{"timezone": "Asia/Tokyo", "format": "2006"}`)
	before := time.Now()
	now := runStep(t, d, memoryStep(t, "f", `{}`)).Update["now"].(map[string]any)
	at, err := time.Parse(time.RFC3339, now["iso"].(string))
	if err != nil || at.Before(before.Add(-time.Second)) || now["timezone"] != "Asia/Tokyo" || now["offset"] != "+09:00" || now["text"] != at.In(time.FixedZone("", 9*3600)).Format("2006") {
		t.Errorf("now %v (%v)", now, err)
	}
	got, err := d.(flows.Tool).Call(context.Background(), memoryStep(t, "f", `{}`), json.RawMessage(`{"timezone": "UTC"}`))
	if err != nil || got.(map[string]any)["offset"] != "+00:00" {
		t.Errorf("as a tool in UTC: %v, %v", got, err)
	}
	if _, err := tryBuildIn(nil, "datetime", `{"timezone": "Mars/Olympus"}`); err == nil || !strings.Contains(err.Error(), "params.timezone") {
		t.Errorf("an unknown zone: %v", err)
	}
}

// Web search speaks each provider's API, sends the key from an allowed secret (redacted
// if it comes back), and goes through the HTTP policy.
func TestWebSearchSpeaksEachProvider(t *testing.T) {
	const key = "tvly-test-key-0123456789"
	var seen []string
	api, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+r.Header.Get("X-Subscription-Token"))
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/search":
			if r.Method == http.MethodPost {
				var body map[string]any
				json.NewDecoder(r.Body).Decode(&body)
				w.Write([]byte(`{"query": "` + body["query"].(string) + `", "results": [{"title": "Go", "url": "https://go.dev", "content": "The Go <b>language</b> (key ` + key + `)"}, {"title": "B", "url": "https://b", "content": "b"}]}`))
				return
			}
			w.Write([]byte(`{"results": [{"title": "Sx", "url": "https://sx", "content": "from searx ` + r.URL.Query().Get("q") + `"}]}`))
		case "/res/v1/web/search":
			w.Write([]byte(`{"web": {"results": [{"title": "Br", "url": "https://br", "description": "count ` + r.URL.Query().Get("count") + `"}]}}`))
		default:
			http.Error(w, `{"detail": "bad key"}`, http.StatusUnauthorized)
		}
	})
	env := &nodes.Env{HTTP: loopbackOK(), LookupEnv: func(n string) (string, bool) {
		if n == "SLUICE_SECRET_SEARCH" {
			return key, true
		}
		return "", false
	}}
	tavily := buildIn(t, env, "web_search", `{"provider": "tavily", "base_url": "`+api.URL+`", "api_key": {"$env": "SLUICE_SECRET_SEARCH"}, "max_results": 1}`)
	out := asJSON(runStep(t, tavily, memoryStep(t, "f", `{"query": "golang"}`)).Update["search_results"])
	if out != `[{"content":"The Go language (key [redacted:SLUICE_SECRET_SEARCH])","title":"Go","url":"https://go.dev"}]` {
		t.Errorf("tavily results %s", out)
	}
	brave := buildIn(t, env, "web_search", `{"provider": "brave", "base_url": "`+api.URL+`", "api_key": {"$env": "SLUICE_SECRET_SEARCH"}}`)
	if out := asJSON(runStep(t, brave, memoryStep(t, "f", `{"query": "x"}`)).Output); !strings.Contains(out, `"content":"count 5"`) {
		t.Errorf("brave results %s", out)
	}
	searx := buildIn(t, env, "web_search", `{"provider": "searxng", "base_url": "`+api.URL+`"}`).(flows.Tool)
	got, err := searx.Call(context.Background(), memoryStep(t, "f", `{}`), json.RawMessage(`{"query": "tides"}`))
	if err != nil || !strings.Contains(asJSON(got), "from searx tides") {
		t.Errorf("searxng as a tool: %s, %v", asJSON(got), err)
	}
	if want := []string{"POST /search Bearer " + key, "GET /res/v1/web/search " + key, "GET /search "}; strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Errorf("requests %q, want %q", seen, want)
	}
	bad := buildIn(t, env, "web_search", `{"provider": "searxng", "base_url": "`+api.URL+`/nope"}`)
	if _, err := bad.Run(context.Background(), memoryStep(t, "f", `{"query": "x"}`)); !flows.IsPermanent(err) || !strings.Contains(err.Error(), "401") {
		t.Errorf("a 401: %v", err)
	}
	guarded := buildIn(t, &nodes.Env{}, "web_search", `{"provider": "searxng", "base_url": "`+api.URL+`"}`)
	if _, err := guarded.Run(context.Background(), memoryStep(t, "f", `{"query": "x"}`)); flows.ErrorCode(err) != flows.Forbidden {
		t.Errorf("a loopback instance without the allow-list: %v", err)
	}
	if _, err := tryBuildIn(env, "web_search", `{"provider": "tavily"}`); err == nil || !strings.Contains(err.Error(), "api_key") {
		t.Errorf("tavily without a key: %v", err)
	}
	if _, err := tryBuildIn(env, "web_search", `{"provider": "searxng"}`); err == nil || !strings.Contains(err.Error(), "base_url") {
		t.Errorf("searxng without a base_url: %v", err)
	}
}

// The Google-result providers (SearchApi, SerpApi, Serper) and ScrapeGraph's search: each
// request as its API takes it, the key where it wants it, the answer as {title, url,
// content} results.
func TestWebSearchSpeaksTheGoogleResultProvidersAndScrapeGraph(t *testing.T) {
	const key = "sk-search-test-0123456789"
	var seen []string
	api, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		seen = append(seen, fmt.Sprintf("%s %s q=%s%v num=%s%v | %s%s%s%s", r.Method, r.URL.Path, r.URL.Query().Get("q"), body["q"],
			r.URL.Query().Get("num"), body["num"], r.Header.Get("Authorization"), r.URL.Query().Get("api_key"), r.Header.Get("X-API-KEY"), r.Header.Get("SGAI-APIKEY")))
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/search", "/search.json":
			w.Write([]byte(`{"organic_results": [{"title": "Go", "link": "https://go.dev", "snippet": "The Go language"}]}`))
		case "/search":
			w.Write([]byte(`{"organic": [{"title": "Serper", "link": "https://serper.dev", "snippet": "Google results"}]}`))
		case "/v1/searchscraper":
			w.Write([]byte(`{"result": {"answer": "Lyon"}, "reference_urls": ["https://a.example", "https://b.example"]}`))
		}
	})
	env := &nodes.Env{HTTP: loopbackOK(), LookupEnv: func(n string) (string, bool) { return key, n == "SLUICE_SECRET_SEARCH" }}
	for _, tc := range []struct{ provider, want string }{
		{"searchapi", `[{"content":"The Go language","title":"Go","url":"https://go.dev"}]`},
		{"serpapi", `[{"content":"The Go language","title":"Go","url":"https://go.dev"}]`},
		{"serper", `[{"content":"Google results","title":"Serper","url":"https://serper.dev"}]`},
		{"scrapegraph", `[{"content":"{\"answer\":\"Lyon\"}","title":"ScrapeGraph's answer","url":"https://a.example"},{"content":"","title":"https://a.example","url":"https://a.example"},{"content":"","title":"https://b.example","url":"https://b.example"}]`},
	} {
		n := buildIn(t, env, "web_search", `{"provider": "`+tc.provider+`", "base_url": "`+api.URL+`", "api_key": {"$env": "SLUICE_SECRET_SEARCH"}, "max_results": 3}`)
		if out := asJSON(runStep(t, n, memoryStep(t, "f", `{"query": "where is it"}`)).Output); out != tc.want {
			t.Errorf("%s: %s, want %s", tc.provider, out, tc.want)
		}
	}
	want := []string{
		"GET /api/v1/search q=where is it<nil> num=3<nil> | Bearer " + key,
		"GET /search.json q=where is it<nil> num=3<nil> | " + key,
		"POST /search q=where is it num=3 | " + key,
		"POST /v1/searchscraper q=<nil> num=<nil> | " + key,
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}
