package store_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// Small files stay in Redis, large ones go to the object store; both come back whole,
// expire with the file's TTL, and are gone once deleted.
func TestFilesKeepSmallInRedisAndLargeInTheObjectStore(t *testing.T) {
	storetest.Each(t, func(t *testing.T, r *store.Redis) {
		ctx := context.Background()
		s3 := storetest.StartS3(t)
		flow := storetest.FlowID(t)
		storetest.DeleteFlowKeys(t, r, flow)
		files, err := store.NewFiles(r, store.FilesOptions{MaxBytes: 4 << 20, InlineMax: 1000, TTL: time.Hour, ObjectStore: s3.ObjectStore("runs/")})
		if err != nil {
			t.Fatal(err)
		}
		if err := files.CheckObjectStore(ctx); err != nil {
			t.Fatal(err)
		}
		small, err := files.Put(ctx, flow, "note.md", "text/markdown", []byte("# Hello"))
		if err != nil {
			t.Fatal(err)
		}
		big := bytes.Repeat([]byte("0123456789"), 300_000) // 3 MB
		large, err := files.Put(ctx, flow, "report.pdf", "application/pdf", big)
		if err != nil {
			t.Fatal(err)
		}
		if small.Where != "redis" || large.Where != "s3" {
			t.Errorf("small kept in %s, large in %s; want redis and s3", small.Where, large.Where)
		}
		if objs := s3.Objects(t, "runs/"); len(objs) != 1 || objs[0] != "runs/"+flow+"/"+large.ID {
			t.Errorf("objects %v, want only the large file's", objs)
		}
		for _, want := range []struct {
			id   string
			data []byte
		}{{small.ID, []byte("# Hello")}, {large.ID, big}} {
			info, data, err := files.Open(ctx, flow, want.id)
			if err != nil || !bytes.Equal(data, want.data) || info.Size != int64(len(want.data)) {
				t.Errorf("open %s: %d bytes, %+v, %v", want.id, len(data), info, err)
			}
		}
		if _, _, err := files.Open(ctx, flow+"-other", small.ID); !errors.Is(err, store.ErrFileNotFound) {
			t.Errorf("another flow opened this flow's file: %v", err)
		}
		for _, id := range []string{small.ID, large.ID} {
			if ttl := r.Client.PTTL(ctx, store.FileKeysOf(flow, id).Meta()).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
				t.Errorf("file %s expires in %s, want 1h", id, ttl)
			}
		}
		if ttl := r.Client.PTTL(ctx, store.FileKeysOf(flow, small.ID).Data()).Val(); ttl <= 59*time.Minute {
			t.Errorf("the small file's bytes expire in %s, want 1h", ttl)
		}
		if _, err := files.Put(ctx, flow, "huge.bin", "", make([]byte, 5<<20)); !errors.Is(err, store.ErrFileTooLarge) {
			t.Errorf("a 5 MiB file with a 4 MiB limit: %v", err)
		}
		if ok, err := files.Delete(ctx, flow, large.ID); !ok || err != nil {
			t.Fatalf("delete: %v, %v", ok, err)
		}
		if objs := s3.Objects(t, "runs/"); len(objs) != 0 {
			t.Errorf("objects after the delete: %v", objs)
		}
		if _, _, err := files.Open(ctx, flow, large.ID); !errors.Is(err, store.ErrFileNotFound) {
			t.Errorf("open after delete: %v", err)
		}
	})
}

// A large file whose record expired has its object deleted by a later Put.
func TestFilesSweepExpiredObjects(t *testing.T) {
	ctx := context.Background()
	r := storetest.Embedded(t)
	s3 := storetest.StartS3(t)
	flow := storetest.FlowID(t)
	files, err := store.NewFiles(r, store.FilesOptions{InlineMax: 10, TTL: time.Hour, ObjectStore: s3.ObjectStore("")})
	if err != nil {
		t.Fatal(err)
	}
	old, err := files.Put(ctx, flow, "old.txt", "text/plain", []byte(strings.Repeat("x", 100)))
	if err != nil {
		t.Fatal(err)
	}
	// The record expires as Redis would expire it, and its due time is past.
	r.Client.Del(ctx, store.FileKeysOf(flow, old.ID).Meta())
	r.Client.ZAdd(ctx, "sluice:files:expiry", redis.Z{Score: 1, Member: flow + "/" + old.ID})
	if _, err := files.Put(ctx, flow, "new.txt", "text/plain", []byte(strings.Repeat("y", 100))); err != nil {
		t.Fatal(err)
	}
	for _, k := range s3.Objects(t, "") {
		if strings.HasSuffix(k, old.ID) {
			t.Errorf("the expired file's object %s is still in the bucket", k)
		}
	}
}

func TestParseObjectStore(t *testing.T) {
	for _, c := range []struct{ url, endpoint, bucket, prefix string }{
		{"http://127.0.0.1:9000/sluice/files", "127.0.0.1:9000", "sluice", "files/"},
		{"https://minio.internal/b", "minio.internal", "b", ""},
		{"s3://my-bucket/runs?region=eu-west-3", "s3.eu-west-3.amazonaws.com", "my-bucket", "runs/"},
	} {
		o, err := store.ParseObjectStore(c.url, nil)
		if err != nil || o.Endpoint != c.endpoint || o.Bucket != c.bucket || o.Prefix != c.prefix {
			t.Errorf("%s: %+v, %v", c.url, o, err)
		}
	}
	for _, bad := range []string{"http://key:secret@host/b", "ftp://host/b", "http://host/"} {
		if _, err := store.ParseObjectStore(bad, nil); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}
