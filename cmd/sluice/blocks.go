package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
)

// blockFlags are the settings of the building blocks that keep data: where files go and
// how big and long-lived they may be.
type blockFlags struct {
	filesStore string
	maxBytes   string
	ttl        string
}

// addBlockFlags registers --files-store, --file-max-bytes and --file-ttl on fs.
func addBlockFlags(fs *flag.FlagSet) *blockFlags {
	b := &blockFlags{}
	fs.StringVar(&b.filesStore, "files-store", envOr("SLUICE_FILES_STORE", ""),
		"S3-compatible object store for files larger than 1 MiB, http(s)://HOST/BUCKET/PREFIX or s3://BUCKET/PREFIX, credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (env SLUICE_FILES_STORE); empty keeps every file in Redis")
	fs.StringVar(&b.maxBytes, "file-max-bytes", envOr("SLUICE_FILE_MAX_BYTES", "33554432"),
		"largest file runs may be given, in bytes (env SLUICE_FILE_MAX_BYTES)")
	fs.StringVar(&b.ttl, "file-ttl", envOr("SLUICE_FILE_TTL", "24h"),
		"how long a file is kept after its upload (env SLUICE_FILE_TTL)")
	return b
}

// blockSettings holds, per Env that componentFlags.env built, the file settings its
// flags gave, until attach has Redis to open the files on.
var blockSettings sync.Map // *nodes.Env -> store.FilesOptions

// bind checks the flags and keeps what they say for env (nil: the defaults).
func (b *blockFlags) bind(env *nodes.Env) error {
	var opts store.FilesOptions
	if b != nil {
		n, err := strconv.ParseInt(b.maxBytes, 10, 64)
		if err != nil || n <= 0 {
			return &exitError{code: 2, err: fmt.Errorf("--file-max-bytes %q: want a number of bytes", b.maxBytes)}
		}
		ttl, err := time.ParseDuration(b.ttl)
		if err != nil || ttl <= 0 {
			return &exitError{code: 2, err: fmt.Errorf("--file-ttl %q: want a duration such as 24h", b.ttl)}
		}
		opts.MaxBytes, opts.TTL = n, ttl
		if b.filesStore != "" {
			o, err := store.ParseObjectStore(b.filesStore, os.Getenv)
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("--files-store: %w", err)}
			}
			opts.ObjectStore = o
		}
	}
	blockSettings.Store(env, opts)
	return nil
}

// attachBlocks gives the building blocks what they keep in Redis: conversations and the
// long-term store (memory, memory_store), the vector collections (vector_store), files
// (file; large ones in the object store).
func attachBlocks(ctx context.Context, env *nodes.Env, rdb *store.Redis) {
	env.Memory = store.NewMemory(rdb)
	env.Vectors = store.NewVectors(rdb)
	var opts store.FilesOptions
	if v, ok := blockSettings.Load(env); ok {
		opts = v.(store.FilesOptions)
	}
	log := env.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	files, err := store.NewFiles(rdb, opts)
	if err != nil {
		log.Error("files are not available", "error", err)
		return
	}
	if opts.ObjectStore != nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := files.CheckObjectStore(cctx); err != nil {
			log.Warn("the object store for files does not answer; uploads larger than 1 MiB will fail until it does", "error", err)
		}
		cancel()
	}
	env.Files = files
}

// fileStore is the files env was given, as the server takes them (nil: none).
func fileStore(env *nodes.Env) server.FileStore {
	if f, ok := env.Files.(*store.Files); ok {
		return f
	}
	return nil
}
