package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"unicode"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// FileStore keeps the files runs take by reference (store.Files).
type FileStore interface {
	Put(ctx context.Context, flow, name, contentType string, data []byte) (flows.FileInfo, error)
	Stat(ctx context.Context, flow, id string) (flows.FileInfo, error)
	Open(ctx context.Context, flow, id string) (flows.FileInfo, []byte, error)
	Delete(ctx context.Context, flow, id string) (bool, error)
	Options() store.FilesOptions
}

// FileNameHeader names an uploaded file (path-escaped). Being a header no form can set,
// it also keeps another site's page from uploading: a browser sends it cross-origin only
// after a CORS preflight, as it does application/json.
const FileNameHeader = "X-File-Name"

func (s *Server) fileStore() (FileStore, error) {
	if s.files == nil {
		return nil, &flows.Error{Code: flows.Unavailable, Message: "this server keeps no files (it was started without Redis for them)"}
	}
	return s.files, nil
}

// fileName reads and checks the upload's name: a base name, no control characters.
func fileName(c echo.Context) (string, error) {
	raw := c.Request().Header.Get(FileNameHeader)
	if raw == "" {
		return "", &flows.Error{Code: flows.Unsupported, Path: FileNameHeader,
			Message: "name the file in the " + FileNameHeader + " header (path-escaped), and send its bytes as the body with its Content-Type"}
	}
	name, err := url.PathUnescape(raw)
	if err != nil {
		return "", &flows.Error{Code: flows.Invalid, Path: FileNameHeader, Message: "the file name is not path-escaped: " + err.Error()}
	}
	name = path.Base(strings.ReplaceAll(name, "\\", "/"))
	if name == "." || name == "/" || len(name) > 255 || strings.ContainsFunc(name, unicode.IsControl) {
		return "", &flows.Error{Code: flows.Invalid, Path: FileNameHeader, Message: "a file name is 1 to 255 characters without control characters"}
	}
	return name, nil
}

// uploadFile serves POST /api/flows/:flow/files: the body is the file, its name in
// X-File-Name, its type in Content-Type. The answer is the reference a run's input
// carries ({"$file": ID, ...}).
func (s *Server) uploadFile(c echo.Context) error {
	// First: what a form or another site's page can send (no X-File-Name) is 415, as
	// every API change that is not a JSON request is.
	name, err := fileName(c)
	if err != nil {
		return err
	}
	fs, err := s.fileStore()
	if err != nil {
		return err
	}
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	if err := s.flowExists(flow); err != nil {
		return err
	}
	limit := fs.Options().MaxBytes
	req := c.Request()
	if req.ContentLength > limit {
		return &flows.Error{Code: flows.TooLarge, Flow: flow, Message: fmt.Sprintf("the file is larger than %d bytes, the server's --file-max-bytes", limit)}
	}
	data, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, limit))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &flows.Error{Code: flows.TooLarge, Flow: flow, Message: fmt.Sprintf("the file is larger than %d bytes, the server's --file-max-bytes", limit)}
	}
	if err != nil {
		return &flows.Error{Code: flows.Invalid, Flow: flow, Message: "cannot read the file"}
	}
	ctype := req.Header.Get(echo.HeaderContentType)
	if ctype == "" {
		ctype = http.DetectContentType(data)
	}
	info, err := fs.Put(req.Context(), flow, name, ctype, data)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/api/flows/"+flow+"/files/"+info.ID)
	return c.JSON(http.StatusCreated, info.Ref())
}

// flowExists answers NotFound for a flow the library has neither saved nor drafted.
func (s *Server) flowExists(flow string) error {
	if _, err := s.library.Load(flow); err == nil {
		return nil
	} else if flows.ErrorCode(err) != flows.NotFound {
		return err
	}
	if _, err := s.library.LoadDraft(flow); err == nil {
		return nil
	}
	return &flows.Error{Code: flows.NotFound, Flow: flow, Message: "no flow " + flow}
}

// fileParams reads the flow and file of a file route.
func (s *Server) fileParams(c echo.Context) (FileStore, string, string, error) {
	fs, err := s.fileStore()
	if err != nil {
		return nil, "", "", err
	}
	flow, err := flowParam(c)
	if err != nil {
		return nil, "", "", err
	}
	id := c.Param("file")
	if !store.ValidFileID(id) {
		return nil, "", "", &flows.Error{Code: flows.NotFound, Flow: flow, Path: "file", Message: fmt.Sprintf("no file %q", id)}
	}
	return fs, flow, id, nil
}

// getFile serves GET /api/flows/:flow/files/:file: what describes the file.
func (s *Server) getFile(c echo.Context) error {
	fs, flow, id, err := s.fileParams(c)
	if err != nil {
		return err
	}
	info, err := fs.Stat(c.Request().Context(), flow, id)
	if err != nil {
		return err
	}
	out := info.Ref()
	out["created"], out["where"] = info.Created, info.Where
	return c.JSON(http.StatusOK, out)
}

// fileContent serves GET /api/flows/:flow/files/:file/content: the bytes, as a download.
func (s *Server) fileContent(c echo.Context) error {
	fs, flow, id, err := s.fileParams(c)
	if err != nil {
		return err
	}
	info, data, err := fs.Open(c.Request().Context(), flow, id)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderContentDisposition, fmt.Sprintf("attachment; filename*=UTF-8''%s", url.PathEscape(info.Name)))
	// The bytes are someone's upload: never let a browser run them as this site's page.
	c.Response().Header().Set("Content-Security-Policy", "sandbox")
	ctype := info.ContentType
	if ctype == "" {
		ctype = echo.MIMEOctetStream
	}
	return c.Blob(http.StatusOK, ctype, data)
}

// deleteFile serves DELETE /api/flows/:flow/files/:file.
func (s *Server) deleteFile(c echo.Context) error {
	fs, flow, id, err := s.fileParams(c)
	if err != nil {
		return err
	}
	found, err := fs.Delete(c.Request().Context(), flow, id)
	if err != nil {
		return err
	}
	if !found {
		return store.ErrFileNotFound
	}
	return c.NoContent(http.StatusNoContent)
}
