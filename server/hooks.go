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
	"github.com/sluicehq/sluice/store"
)

// hook is the webhook ingress of a flow (article 000's external ingress): another
// service POSTs JSON, and a run of the flow starts with it as its input. It answers
// 202 with the run id at once. The caller proves it knows the flow's secret with
// "Authorization: Bearer SECRET" or by signing the body: "X-Sluice-Signature:
// sha256=HEX(HMAC-SHA256(SECRET, body))". A flow without a secret has no ingress.
// An Idempotency-Key header makes a retried delivery start the run only once.
func (s *Server) hook(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	secret := s.cfg.HookSecret(flow)
	if secret == "" {
		return &flows.Error{Code: flows.NotFound, Message: "no webhook ingress for this flow"}
	}
	ip := clientIP(c.Request())
	if wait := s.limiter.blocked(ip); wait > 0 {
		return &flows.Error{Code: codeRateLimited, Message: "too many failed authentications from this address; try again later"}
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if !hookAuthorized(c.Request(), secret, body) {
		s.limiter.fail(ip)
		return &flows.Error{Code: flows.Unauthorized, Message: "send the flow's webhook secret as Authorization: Bearer SECRET, or sign the body in X-Sluice-Signature"}
	}
	if len(body) > 0 && !json.Valid(body) {
		return &flows.Error{Code: flows.Invalid, Path: "input", Message: "the body is not JSON"}
	}
	wait, err := s.waitParam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	plan, err := s.planFor(ctx, flow, "")
	if err != nil {
		return err
	}
	opts := engine.StartOptions{}
	if key := c.Request().Header.Get("Idempotency-Key"); key != "" {
		sum := sha256.Sum256([]byte(flow + "\x00" + key))
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

func hookAuthorized(r *http.Request, secret string, body []byte) bool {
	want := sha256.Sum256([]byte(secret))
	if h := r.Header.Get(echo.HeaderAuthorization); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
			return hmac.Equal(got[:], want[:])
		}
		return false
	}
	if sig := r.Header.Get("X-Sluice-Signature"); sig != "" {
		return hmac.Equal([]byte(sig), []byte(engine.Sign([]byte(secret), body)))
	}
	return false
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
