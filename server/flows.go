package server

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"os"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
)

// compiler validates and compiles flow documents.
type compiler interface {
	Compile(doc []byte) (*flows.Plan, flows.Problems, error)
}

// FlowSummary is one flow of the library, as GET /api/flows lists it.
type FlowSummary struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Description string    `json:"description,omitempty"`
	Nodes       int       `json:"nodes"`
	Valid       bool      `json:"valid"`
	Version     string    `json:"version,omitempty"` // set when valid
	Errors      int       `json:"errors"`
	Warnings    int       `json:"warnings"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// FlowList is the body of GET /api/flows.
type FlowList struct {
	Flows []FlowSummary `json:"flows"`
}

// SavedFlow is the answer to a save or an import.
type SavedFlow struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	// Published is true when the version is live: new runs start on it and the
	// in-process workers serve it.
	Published bool `json:"published"`
	// Problems are the document's warnings (a document with errors is not saved).
	Problems flows.Problems `json:"problems"`
}

// Validation is the answer of POST /api/flows/validate.
type Validation struct {
	Valid    bool           `json:"valid"`
	ID       string         `json:"id,omitempty"`
	Version  string         `json:"version,omitempty"`
	Problems flows.Problems `json:"problems"`
}

func (s *Server) listFlows(c echo.Context) error {
	files, err := s.library.List()
	if err != nil {
		return err
	}
	out := FlowList{Flows: make([]FlowSummary, 0, len(files))}
	var comp compiler = s.engine
	for _, f := range files {
		sum := FlowSummary{ID: f.ID, Name: f.ID}
		if st, err := os.Stat(f.Path); err == nil {
			sum.UpdatedAt = st.ModTime().UTC()
		}
		var head struct {
			Name        string            `json:"name"`
			Description string            `json:"description"`
			Nodes       []json.RawMessage `json:"nodes"`
		}
		if json.Unmarshal(f.Data, &head) == nil {
			if head.Name != "" {
				sum.Name = head.Name
			}
			sum.Description, sum.Nodes = head.Description, len(head.Nodes)
		}
		plan, probs, _ := comp.Compile(f.Data)
		if plan != nil {
			sum.Valid, sum.Version = true, plan.Version
		}
		for _, p := range probs {
			if p.Severity == flows.SeverityError {
				sum.Errors++
			} else {
				sum.Warnings++
			}
		}
		out.Flows = append(out.Flows, sum)
	}
	return c.JSON(http.StatusOK, out)
}

// getFlow answers the flow's file as it is saved.
func (s *Server) getFlow(c echo.Context) error {
	id, err := flowParam(c)
	if err != nil {
		return err
	}
	data, err := s.library.Load(id)
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, data)
}

func (s *Server) exportFlow(c echo.Context) error {
	id, err := flowParam(c)
	if err != nil {
		return err
	}
	data, err := s.library.Load(id)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderContentDisposition, mime.FormatMediaType("attachment", map[string]string{"filename": id + ".json"}))
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, data)
}

func (s *Server) validateFlow(c echo.Context) error {
	doc, err := readBody(c)
	if err != nil {
		return err
	}
	var comp compiler = s.engine
	plan, probs, _ := comp.Compile(doc)
	v := Validation{Valid: plan != nil, Problems: probs}
	if v.Problems == nil {
		v.Problems = flows.Problems{}
	}
	if plan != nil {
		v.ID, v.Version = plan.Flow, plan.Version
	}
	return c.JSON(http.StatusOK, v)
}

// saveFlow writes the flow's file after validating it, and publishes the new version at
// once so the in-process workers serve it without a restart.
func (s *Server) saveFlow(c echo.Context) error {
	id := c.Param("flow")
	if !flows.ValidID(id) {
		return &flows.Error{Code: flows.Invalid, Path: "id", Message: fmt.Sprintf("flow id %q is not valid: use lower-case letters, digits, '-' and '_'", id)}
	}
	doc, err := readBody(c)
	if err != nil {
		return err
	}
	_, existed := s.library.Load(id)
	saved, err := s.save(c, id, doc)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if flows.ErrorCode(existed) == flows.NotFound {
		status = http.StatusCreated
	}
	return c.JSON(status, saved)
}

// importFlow adds a flow from an uploaded document (a JSON body); the flow's id comes
// from the document. An existing flow is replaced only with ?overwrite=true. A multipart
// upload is refused (protect.go): it is what another site's form could send.
func (s *Server) importFlow(c echo.Context) error {
	doc, err := readBody(c)
	if err != nil {
		return err
	}
	var comp compiler = s.engine
	plan, _, err := comp.Compile(doc)
	if err != nil {
		return err
	}
	if _, lerr := s.library.Load(plan.Flow); lerr == nil && c.QueryParam("overwrite") != "true" {
		return &flows.Error{Code: flows.Conflict, Flow: plan.Flow, Message: "a flow with this id exists; import with ?overwrite=true to replace it, or change the document's id"}
	}
	saved, err := s.save(c, plan.Flow, doc)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/api/flows/"+plan.Flow)
	return c.JSON(http.StatusCreated, saved)
}

func (s *Server) save(c echo.Context, id string, doc []byte) (*SavedFlow, error) {
	var comp compiler = s.engine
	plan, probs, err := comp.Compile(doc)
	if err != nil {
		return nil, err
	}
	if plan.Flow != id {
		probs = append(probs, flows.Problem{Severity: flows.SeverityError, Code: flows.CodeInvalidID, Path: "id",
			Message: fmt.Sprintf("the document's id %q is not the flow's id %q in the URL", plan.Flow, id)})
		return nil, &flows.InvalidError{Flow: id, Problems: probs}
	}
	if err := s.library.Save(id, doc); err != nil {
		return nil, err
	}
	saved := &SavedFlow{ID: id, Version: plan.Version, Problems: probs}
	if saved.Problems == nil {
		saved.Problems = flows.Problems{}
	}
	if s.sync != nil {
		if _, _, err := s.sync.Publish(c.Request().Context(), id, doc); err != nil {
			// The file is saved; the library watcher publishes it when Redis is back.
			s.log.Warn("saved flow not published yet", "flow", id, "error", err)
			return saved, nil
		}
		saved.Published = true
	}
	return saved, nil
}

func (s *Server) deleteFlow(c echo.Context) error {
	id, err := flowParam(c)
	if err != nil {
		return err
	}
	if err := s.library.Delete(id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
