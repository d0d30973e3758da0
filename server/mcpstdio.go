package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioTransport is MCP over a reader and a writer, one JSON-RPC message per line, for
// `sluice mcp`. Unlike the SDK's stdio transport, whose first malformed line ends the
// session, a line that is not JSON gets a parse error (-32700) and one that is JSON but
// no JSON-RPC 2.0 message an invalid request (-32600), as JSON-RPC asks, and the
// session goes on. Lines longer than MaxLine bytes are answered with a parse error and
// skipped.
type StdioTransport struct {
	In      io.Reader
	Out     io.Writer
	MaxLine int // 0: mcp.DefaultMaxLineLength
}

// Connect implements mcp.Transport.
func (t *StdioTransport) Connect(context.Context) (mcp.Connection, error) {
	max := t.MaxLine
	if max <= 0 {
		max = mcp.DefaultMaxLineLength
	}
	c := &stdioConn{out: t.Out, lines: make(chan stdioLine), closed: make(chan struct{})}
	go c.readLines(bufio.NewReaderSize(t.In, 64<<10), max)
	return c, nil
}

type stdioLine struct {
	data    []byte
	tooLong bool
	err     error
}

type stdioConn struct {
	wmu       sync.Mutex
	out       io.Writer
	lines     chan stdioLine
	closed    chan struct{}
	closeOnce sync.Once
}

// readLines sends every line of r (trimmed, empty ones left out), then the error that
// ended r. A read cannot be interrupted, so Close only stops Read from waiting for it.
func (c *stdioConn) readLines(r *bufio.Reader, max int) {
	for {
		line, tooLong, err := readLine(r, max)
		if line = bytes.TrimSpace(line); len(line) > 0 || tooLong {
			if !c.send(stdioLine{data: line, tooLong: tooLong}) {
				return
			}
		}
		if err != nil {
			c.send(stdioLine{err: err})
			return
		}
	}
}

// readLine reads up to the next '\n'; of a line longer than max it keeps nothing.
func readLine(r *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		part, err := r.ReadSlice('\n')
		if !tooLong {
			line = append(line, part...)
			if len(line) > max {
				line, tooLong = nil, true
			}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, tooLong, err
		}
	}
}

func (c *stdioConn) send(l stdioLine) bool {
	select {
	case c.lines <- l:
		return true
	case <-c.closed:
		return false
	}
}

// Read returns the next well-formed message, answering the malformed ones on the way.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		var l stdioLine
		select {
		case l = <-c.lines:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		}
		if l.err != nil {
			return nil, l.err
		}
		msg, code, why := decodeLine(l)
		if msg != nil {
			return msg, nil
		}
		if err := c.writeError(idOf(l.data), code, why); err != nil {
			return nil, err
		}
	}
}

// decodeLine decodes one line, or says which error answers it.
func decodeLine(l stdioLine) (jsonrpc.Message, int64, string) {
	switch {
	case l.tooLong:
		return nil, jsonrpc.CodeParseError, "the message is too long"
	case !json.Valid(l.data): // also refuses nesting deeper than encoding/json's limit
		return nil, jsonrpc.CodeParseError, "the line is not JSON"
	case l.data[0] == '[':
		return nil, jsonrpc.CodeInvalidRequest, "batches are not served: send one JSON-RPC message per line"
	case l.data[0] != '{':
		return nil, jsonrpc.CodeInvalidRequest, "a JSON-RPC message is a JSON object"
	}
	msg, err := jsonrpc.DecodeMessage(l.data)
	if err != nil {
		return nil, jsonrpc.CodeInvalidRequest, "not a JSON-RPC 2.0 message: " + err.Error()
	}
	return msg, 0, ""
}

// idOf is the id of a malformed request when it has one that can be told (a string or a
// number), else null.
func idOf(line []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &m) == nil && len(m.ID) > 0 {
		var s string
		var n json.Number
		if json.Unmarshal(m.ID, &s) == nil || json.Unmarshal(m.ID, &n) == nil {
			return m.ID
		}
	}
	return json.RawMessage("null")
}

func (c *stdioConn) writeError(id json.RawMessage, code int64, message string) error {
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: message}})
	return c.writeLine(b)
}

// Write implements mcp.Connection.
func (c *stdioConn) Write(_ context.Context, msg jsonrpc.Message) error {
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encoding a message: %w", err)
	}
	return c.writeLine(b)
}

func (c *stdioConn) writeLine(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.out.Write(append(b, '\n'))
	return err
}

// Close implements mcp.Connection.
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

// SessionID implements mcp.Connection: stdio has one session, unnamed.
func (c *stdioConn) SessionID() string { return "" }

var _ mcp.Transport = (*StdioTransport)(nil)
