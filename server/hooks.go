package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/engine/dispatch"
	"github.com/sluicehq/sluice/store"
)

// hook is the webhook ingress of a flow (article 000's external ingress): another
// service POSTs JSON, and a run of the flow starts with it as its input. It answers
// 202 with the run id at once. The caller proves it knows the flow's secret with
// "Authorization: Bearer SECRET" or by signing the body: "X-Sluice-Signature:
// sha256=HEX(HMAC-SHA256(SECRET, body))". A flow without a secret has no ingress.
// An Idempotency-Key header makes a retried delivery start the run only once.
//
// Nothing is read of the body before the caller could be right: the flow must have a
// secret, a bearer secret is checked at once, a signature must be present; then at most
// cfg.HookConcurrency bodies are read at a time (503 past that), each within
// cfg.ReadTimeout (408).
func (s *Server) hook(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	secret := s.cfg.HookSecret(flow)
	if secret == "" {
		return &flows.Error{Code: flows.NotFound, Message: "no webhook ingress for this flow"}
	}
	req := c.Request()
	ip := clientIP(req)
	refuse := func() error {
		if err := s.rateLimited(c, ip); err != nil {
			return err
		}
		s.limiter.fail(ip)
		return &flows.Error{Code: flows.Unauthorized, Message: "send the flow's webhook secret as Authorization: Bearer SECRET, or sign the body in X-Sluice-Signature"}
	}
	bearer, hasBearer := hookBearer(req)
	sig := req.Header.Get("X-Sluice-Signature")
	switch {
	case hasBearer:
		if !secretEqual(bearer, secret) {
			return refuse()
		}
	case sig == "":
		return refuse()
	default:
		// The signature needs the body: a blocked address does not get to send one.
		if err := s.rateLimited(c, ip); err != nil {
			return err
		}
	}
	select {
	case s.hookReads <- struct{}{}:
	default:
		c.Response().Header().Set("Retry-After", "1")
		return &flows.Error{Code: flows.Unavailable, Message: "too many webhook deliveries are being received; retry shortly"}
	}
	body, err := readBody(c)
	<-s.hookReads
	if err != nil {
		return err
	}
	if !hasBearer && !hmac.Equal([]byte(sig), []byte(dispatch.Sign([]byte(secret), body))) {
		return refuse()
	}
	if len(body) > 0 && !json.Valid(body) {
		return &flows.Error{Code: flows.Invalid, Path: "input", Message: "the body is not JSON"}
	}
	wait, err := s.waitParam(c)
	if err != nil {
		return err
	}
	ctx := req.Context()
	plan, err := s.planFor(ctx, flow, "")
	if err != nil {
		return err
	}
	opts := engine.StartOptions{Environment: environmentFrom(ctx)}
	if key := req.Header.Get("Idempotency-Key"); key != "" {
		id := flow + "\x00" + key
		if opts.Environment != "" {
			id += "\x00" + opts.Environment // the same delivery to another environment is another run
		}
		sum := sha256.Sum256([]byte(id))
		opts.RunID = "h" + hex.EncodeToString(sum[:12])
	}
	id, err := s.runs().Start(ctx, plan, body, opts)
	if flows.ErrorCode(err) == flows.Conflict && opts.RunID != "" {
		id, err = opts.RunID, nil // delivered before: that run is the answer
	}
	if err != nil {
		return err
	}
	s.metrics.hookRuns.WithLabelValues(flow).Inc()
	return s.answerStarted(c, flow, id, wait)
}

// hookBearer returns the secret of an Authorization header; ok is true when the header
// is there at all (a header of another scheme is a wrong secret, not none).
func hookBearer(r *http.Request) (string, bool) {
	h := r.Header.Get(echo.HeaderAuthorization)
	if h == "" {
		return "", false
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(tok), true
}

// secretEqual compares in constant time, the lengths hidden by hashing.
func secretEqual(got, want string) bool {
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return got != "" && hmac.Equal(a[:], b[:])
}

// HookInfo says how to call a flow's webhook ingress; it never contains the secret.
type HookInfo struct {
	URL     string `json:"url"`
	Enabled bool   `json:"enabled"`
	// SecretEnv is the environment variable of the server that holds the secret.
	SecretEnv string `json:"secret_env"`
}

func (s *Server) hookInfo(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, HookInfo{URL: "/hooks/" + flow, Enabled: s.cfg.HookSecret(flow) != "", SecretEnv: HookSecretEnv(flow)})
}

// deliveries lists, retries and discards result webhooks that could not be delivered.
type deliveries interface {
	FailedDeliveries(ctx context.Context, flow string, count int64) ([]store.FailedDelivery, error)
	RetryDelivery(ctx context.Context, flow, id string) (string, error)
	DiscardDelivery(ctx context.Context, flow, id string) error
}

var _ deliveries = (*store.Redis)(nil)

// DeliveryList is the body of GET .../deliveries: result webhooks given up on.
type DeliveryList struct {
	Deliveries []store.FailedDelivery `json:"deliveries"`
}

func (s *Server) deliveries() deliveries { return s.rdb }

func (s *Server) listFailedDeliveries(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	limit, err := intParam(c, "limit", 100)
	if err != nil {
		return err
	}
	ds, err := s.deliveries().FailedDeliveries(c.Request().Context(), flow, int64(min(max(limit, 1), 1000)))
	if err != nil {
		return err
	}
	if ds == nil {
		ds = []store.FailedDelivery{}
	}
	return c.JSON(http.StatusOK, DeliveryList{Deliveries: ds})
}

// retryDelivery puts a failed delivery back on the results stream: the dispatcher sends
// the run's result to its webhooks again.
func (s *Server) retryDelivery(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	id, err := deadID(c)
	if err != nil {
		return err
	}
	entry, err := s.deliveries().RetryDelivery(c.Request().Context(), flow, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, Retried{ID: id, Entry: entry})
}

func (s *Server) discardDelivery(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	id, err := deadID(c)
	if err != nil {
		return err
	}
	if err := s.deliveries().DiscardDelivery(c.Request().Context(), flow, id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
