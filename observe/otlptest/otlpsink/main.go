// Command otlpsink is a local OTLP/HTTP trace receiver that decodes and counts what it
// is sent, for measuring what tracing costs (docs/benchmarks.md) without a collector:
//
//	go run ./observe/otlptest/otlpsink -addr 127.0.0.1:4318
//
// It prints the spans it received every few seconds and when it stops (SIGINT).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"time"

	collpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:4318", "address to listen on")
	flag.Parse()
	var spans, requests atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var msg collpb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range msg.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				spans.Add(int64(len(ss.Spans)))
			}
		}
		requests.Add(1)
		out, _ := proto.Marshal(&collpb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	fmt.Fprintf(os.Stderr, "otlpsink: listening on http://%s\n", ln.Addr())
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			srv.Close()
			fmt.Fprintf(os.Stderr, "otlpsink: %d spans in %d requests\n", spans.Load(), requests.Load())
			return
		case <-t.C:
			fmt.Fprintf(os.Stderr, "otlpsink: %d spans in %d requests\n", spans.Load(), requests.Load())
		}
	}
}
