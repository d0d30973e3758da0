package storetest

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/sluicehq/sluice/store"
)

// S3 is an S3-compatible server on loopback for one test: gofakes3 (pinned in go.mod)
// with an in-memory backend, speaking the S3 REST protocol the object store's client
// (minio-go) speaks to AWS or MinIO.
type S3 struct {
	URL     string
	Backend *s3mem.Backend
	Bucket  string
	srv     *httptest.Server
}

// StartS3 starts the server with one bucket, stopped when the test ends.
func StartS3(t testing.TB) *S3 {
	t.Helper()
	b := s3mem.New()
	bucket := "sluice-test"
	if err := b.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	faker := gofakes3.New(b, gofakes3.WithoutVersioning())
	srv := httptest.NewServer(faker.Server())
	t.Cleanup(srv.Close)
	return &S3{URL: srv.URL, Backend: b, Bucket: bucket, srv: srv}
}

// ObjectStore is the server's bucket under prefix, as store.Files takes it.
func (s *S3) ObjectStore(prefix string) *store.ObjectStore {
	return &store.ObjectStore{Endpoint: strings.TrimPrefix(s.URL, "http://"), Bucket: s.Bucket, Prefix: prefix,
		Region: "us-east-1", Creds: credentials.NewStaticV4("test-access", "test-secret-key", "")}
}

// Objects lists the keys of the bucket's objects under prefix.
func (s *S3) Objects(t testing.TB, prefix string) []string {
	t.Helper()
	list, err := s.Backend.ListBucket(s.Bucket, &gofakes3.Prefix{Prefix: prefix, HasPrefix: true}, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range list.Contents {
		keys = append(keys, c.Key)
	}
	return keys
}
