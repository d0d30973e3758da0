package nodes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/flows"
)

// DefaultProvider is the provider a flow gets when it names none. The server builds it
// from OPENAI_BASE_URL and OPENAI_API_KEY.
const DefaultProvider = "default"

// OpenAIBaseURL is OpenAI's API, the default provider's base URL when OPENAI_BASE_URL
// is not set.
const OpenAIBaseURL = "https://api.openai.com/v1"

// Provider types.
const (
	// ProviderOpenAI speaks the OpenAI chat completions API: OpenAI, Ollama, vLLM,
	// llama.cpp's server.
	ProviderOpenAI = "openai"
	// ProviderAnthropic speaks Anthropic's Messages API, with prompt caching.
	ProviderAnthropic = "anthropic"
)

// AnthropicBaseURL is Anthropic's API, the base URL of an anthropic provider that names
// none.
const AnthropicBaseURL = "https://api.anthropic.com"

// Provider is a model endpoint configured on the server: an OpenAI-compatible chat
// completions API (OpenAI, Ollama, vLLM, llama.cpp's server) or Anthropic's Messages API.
// Flows name providers; they never hold a base URL or a key.
type Provider struct {
	Name string `json:"-"`
	// Type is "openai" (the default) or "anthropic".
	Type    string `json:"type,omitempty"`
	BaseURL string `json:"base_url"`
	// APIKeyEnv names the environment variable that holds the key ("" for servers
	// that need none).
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// MaxRetries is how often a request that failed with 408, 409, 429, 5xx or a broken
	// connection is repeated, with backoff and Retry-After respected (nil: 2).
	MaxRetries *int `json:"max_retries,omitempty"`
	// Timeout bounds one request (0: only the step's deadline).
	Timeout flows.Duration `json:"timeout,omitzero"`
	// RateLimit, when set, is shared by every process on the same Redis: requests
	// wait for their turn instead of failing with 429.
	RateLimit *RateLimit `json:"rate_limit,omitempty"`
	// Prices are USD per million tokens by model ("*": every other model), for dollar
	// budgets.
	Prices map[string]*Price `json:"prices,omitempty"`
	// Workspaces, when set, are the only workspaces whose flows may call the provider
	// (docs/teams.md); empty: every workspace's.
	Workspaces []string `json:"workspaces,omitempty"`

	// APIKey is the key, read from the environment by the server; never printed,
	// logged or stored.
	APIKey string `json:"-"`
	// HTTPClient replaces the default client (tests).
	HTTPClient *http.Client `json:"-"`
}

// String describes the provider without its key.
func (p *Provider) String() string {
	key := "no key"
	if p.APIKey != "" {
		key = "key from $" + p.APIKeyEnv
	}
	return fmt.Sprintf("%s (%s, %s)", p.Name, p.BaseURL, key)
}

// kind is Type with its default.
func (p *Provider) kind() string {
	if p.Type == "" {
		return ProviderOpenAI
	}
	return p.Type
}

// retries is MaxRetries with its default.
func (p *Provider) retries() int {
	if p.MaxRetries == nil {
		return 2
	}
	return *p.MaxRetries
}

var providerName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ProvidersFile is the providers config file:
//
//	{"providers": {
//	  "local":  {"base_url": "http://localhost:11434/v1"},
//	  "openai": {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY", "max_retries": 4, "timeout": "2m"}
//	}}
type ProvidersFile struct {
	Providers map[string]*Provider `json:"providers"`
}

// ParseProviders reads a providers config file and the keys its providers name from
// lookupEnv. Keys are never in the file: a provider with "api_key" is refused.
func ParseProviders(data []byte, lookupEnv func(string) (string, bool)) (map[string]*Provider, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f ProvidersFile
	if err := dec.Decode(&f); err != nil {
		if strings.Contains(err.Error(), `"api_key"`) {
			return nil, fmt.Errorf("providers: an API key is never written in the file: put it in an environment variable and name it with \"api_key_env\"")
		}
		return nil, fmt.Errorf("providers: %v", err)
	}
	out := map[string]*Provider{}
	names := make([]string, 0, len(f.Providers))
	for name := range f.Providers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := f.Providers[name]
		if p == nil {
			return nil, fmt.Errorf("providers: %q is null", name)
		}
		if !providerName.MatchString(name) {
			return nil, fmt.Errorf("providers: name %q: use lower-case letters, digits, '-' and '_'", name)
		}
		p.Name = name
		switch p.Type {
		case "", ProviderOpenAI:
		case ProviderAnthropic:
			if p.BaseURL == "" {
				p.BaseURL = AnthropicBaseURL
			}
		default:
			return nil, fmt.Errorf("providers: %s: type %q: want \"openai\" or \"anthropic\"", name, p.Type)
		}
		if err := checkBaseURL(p.BaseURL); err != nil {
			return nil, fmt.Errorf("providers: %s: %v", name, err)
		}
		if err := p.RateLimit.check(); err != nil {
			return nil, fmt.Errorf("providers: %s: rate_limit%v", name, err)
		}
		for model, price := range p.Prices {
			if err := price.check(); err != nil {
				return nil, fmt.Errorf("providers: %s: prices[%q]: %v", name, model, err)
			}
		}
		for i, ws := range p.Workspaces {
			if !flows.ValidID(ws) {
				return nil, fmt.Errorf("providers: %s: workspaces[%d]: %q is not a workspace id", name, i, ws)
			}
		}
		if p.MaxRetries != nil && (*p.MaxRetries < 0 || *p.MaxRetries > 10) {
			return nil, fmt.Errorf("providers: %s: max_retries must be 0 to 10", name)
		}
		if p.APIKeyEnv != "" {
			if !envName.MatchString(p.APIKeyEnv) {
				return nil, fmt.Errorf("providers: %s: api_key_env %q is not an environment variable name", name, p.APIKeyEnv)
			}
			key, ok := lookupEnv(p.APIKeyEnv)
			if !ok || key == "" {
				return nil, fmt.Errorf("providers: %s: environment variable %s (api_key_env) is not set", name, p.APIKeyEnv)
			}
			p.APIKey = key
		}
		out[name] = p
	}
	return out, nil
}

func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base_url %q: want an http(s) URL such as http://localhost:11434/v1", s)
	}
	if u.User != nil {
		return fmt.Errorf("base_url carries credentials; name the key's environment variable in api_key_env")
	}
	return nil
}

// NewDefaultProvider is the default provider from OPENAI_BASE_URL (empty: OpenAI's API)
// and the key in OPENAI_API_KEY.
func NewDefaultProvider(baseURL, apiKey string) (*Provider, error) {
	if baseURL == "" {
		baseURL = OpenAIBaseURL
	}
	if err := checkBaseURL(baseURL); err != nil {
		return nil, fmt.Errorf("OPENAI_BASE_URL: %v", err)
	}
	p := &Provider{Name: DefaultProvider, BaseURL: baseURL, APIKey: apiKey}
	if apiKey != "" {
		p.APIKeyEnv = "OPENAI_API_KEY"
	}
	return p, nil
}
